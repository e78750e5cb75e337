"""Aggregate BFCL case results into the report: rows, JSON, Markdown, a rich table.

One row per category x run (dialect / enforcement level, or the BFCL prompt-mode
baseline), and, when several categories ran, a ``mean`` row per run (the unweighted
mean of the category accuracies, as BFCL averages its categories).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from agentfsm.eval.runner import BASELINE, CaseResult, RunSpec
from agentfsm.runtime.files import write_whole

__all__ = [
    "COLUMNS",
    "REPORT_SUFFIXES",
    "ReportRow",
    "aggregate",
    "render_markdown",
    "render_table",
    "report_json",
    "report_stem",
    "write_report",
]

COLUMNS: tuple[str, ...] = (
    "category",
    "run",
    "cases",
    "accuracy %",
    "vs baseline (pts)",
    "parse rate %",
    "protocol-valid %",
    "repaired",
    "corrections by guard",
    "refusals",
    "mean attempts",
    "tokens/case",
    "s/case",
)

MEAN = "mean"


@dataclass(frozen=True)
class ReportRow:
    """One line of the report."""

    category: str
    spec: RunSpec
    cases: int
    accuracy: float
    parse_rate: float
    protocol_valid: float
    repaired: int
    corrections: dict[str, int] = field(default_factory=dict)
    refusals: int = 0
    mean_attempts: float = 0.0
    tokens_per_case: float = 0.0
    seconds_per_case: float = 0.0
    gain: float | None = None

    def cells(self) -> list[str]:
        """The row as table cells, in :data:`COLUMNS` order."""
        corr = ", ".join(f"{k}: {v}" for k, v in sorted(self.corrections.items())) or "-"
        gain = "-" if self.gain is None else f"{self.gain:+.1f}"
        return [
            self.category,
            self.spec.label,
            str(self.cases),
            f"{self.accuracy:.1f}",
            gain,
            f"{self.parse_rate:.1f}",
            f"{self.protocol_valid:.1f}",
            str(self.repaired),
            corr,
            str(self.refusals),
            f"{self.mean_attempts:.2f}",
            f"{self.tokens_per_case:.0f}",
            f"{self.seconds_per_case:.2f}",
        ]

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the JSON report."""
        return {
            "category": self.category,
            "dialect": self.spec.dialect,
            "enforcement": self.spec.enforcement,
            "run": self.spec.label,
            "cases": self.cases,
            "accuracy": round(self.accuracy, 2),
            "gain_vs_baseline_points": None if self.gain is None else round(self.gain, 2),
            "parse_rate": round(self.parse_rate, 2),
            "protocol_valid": round(self.protocol_valid, 2),
            "repaired_replies": self.repaired,
            "corrections_by_guard": dict(sorted(self.corrections.items())),
            "refusals": self.refusals,
            "mean_attempts": round(self.mean_attempts, 3),
            "tokens_per_case": round(self.tokens_per_case, 1),
            "seconds_per_case": round(self.seconds_per_case, 3),
        }


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def _row(category: str, spec: RunSpec, results: Sequence[CaseResult]) -> ReportRow:
    n = len(results)
    replies = sum(r.replies for r in results)
    corrections: Counter[str] = Counter()
    for r in results:
        corrections.update(r.corrections)
    return ReportRow(
        category=category,
        spec=spec,
        cases=n,
        accuracy=_pct(sum(r.valid for r in results), n),
        parse_rate=_pct(sum(r.parsed_replies for r in results), replies),
        protocol_valid=_pct(sum(r.protocol_valid for r in results), n),
        repaired=sum(r.repaired_replies for r in results),
        corrections=dict(corrections),
        refusals=sum(r.refusals for r in results),
        mean_attempts=replies / n if n else 0.0,
        tokens_per_case=sum(r.prompt_tokens + r.completion_tokens for r in results) / n if n else 0.0,
        seconds_per_case=sum(r.seconds for r in results) / n if n else 0.0,
    )


def _with_gain(rows: list[ReportRow]) -> list[ReportRow]:
    base = {r.category: r.accuracy for r in rows if r.spec == BASELINE}
    out: list[ReportRow] = []
    for r in rows:
        gain = r.accuracy - base[r.category] if r.category in base and r.spec != BASELINE else None
        out.append(ReportRow(**{**r.__dict__, "gain": gain}))
    return out


def aggregate(results: Sequence[CaseResult]) -> list[ReportRow]:
    """Rows per category x run, in first-seen order, then ``mean`` rows over categories."""
    groups: dict[tuple[str, RunSpec], list[CaseResult]] = {}
    for r in results:
        groups.setdefault((r.category, RunSpec(r.dialect, r.enforcement)), []).append(r)
    rows = [_row(cat, spec, rs) for (cat, spec), rs in groups.items()]
    categories = list(dict.fromkeys(r.category for r in rows))
    if len(categories) > 1:
        specs = list(dict.fromkeys(r.spec for r in rows))
        for spec in specs:
            mine = [r for r in rows if r.spec == spec]
            if len(mine) != len(categories):
                continue
            rows.append(_mean_row(spec, mine))
    return _with_gain(rows)


def _mean_row(spec: RunSpec, rows: Sequence[ReportRow]) -> ReportRow:
    k = len(rows)
    corrections: Counter[str] = Counter()
    for r in rows:
        corrections.update(r.corrections)
    return ReportRow(
        category=MEAN,
        spec=spec,
        cases=sum(r.cases for r in rows),
        accuracy=sum(r.accuracy for r in rows) / k,
        parse_rate=sum(r.parse_rate for r in rows) / k,
        protocol_valid=sum(r.protocol_valid for r in rows) / k,
        repaired=sum(r.repaired for r in rows),
        corrections=dict(corrections),
        refusals=sum(r.refusals for r in rows),
        mean_attempts=sum(r.mean_attempts * r.cases for r in rows) / max(1, sum(r.cases for r in rows)),
        tokens_per_case=sum(r.tokens_per_case * r.cases for r in rows) / max(1, sum(r.cases for r in rows)),
        seconds_per_case=sum(r.seconds_per_case * r.cases for r in rows) / max(1, sum(r.cases for r in rows)),
    )


def render_table(rows: Sequence[ReportRow], title: str = "BFCL through agentfsm") -> Table:
    """A rich table of the rows."""
    table = Table(title=title)
    for col in COLUMNS:
        table.add_column(col, justify="left" if col in ("category", "run", "corrections by guard") else "right")
    for r in rows:
        table.add_row(*r.cells(), style="dim" if r.spec == BASELINE else None)
    return table


def render_markdown(rows: Sequence[ReportRow], meta: dict[str, Any]) -> str:
    """The report as Markdown: how it was made, then the table (a partial report's first
    line is ``meta["partial"]``: how far it got and why it stopped)."""
    lines = [f"# {meta['partial']}", ""] if meta.get("partial") else []
    lines += ["# BFCL through agentfsm", ""]
    if meta.get("command"):
        lines += ["Command:", "", "```", str(meta["command"]), "```", ""]
    for key in ("date", "backend", "model", "machine", "bfcl_eval", "max_tokens"):
        if meta.get(key) is not None:
            lines.append(f"- {key}: {meta[key]}")
    lines += [
        "",
        "Scored with a port of BFCL's AST checker; irrelevance categories count any call as wrong. "
        "`vs baseline` is the accuracy difference, in points, to BFCL's own prompt mode "
        "(its system prompt and decoder) on the same backend and cases in the same run.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" if c in ("category", "run", "corrections by guard") else "---:" for c in COLUMNS) + "|",
    ]
    for r in rows:
        cells = r.cells()
        if r.category == MEAN:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report_json(rows: Sequence[ReportRow], results: Sequence[CaseResult], meta: dict[str, Any]) -> dict[str, Any]:
    """The whole report: how it was made, the rows, and every case."""
    return {"meta": meta, "rows": [r.to_json() for r in rows], "cases": [c.to_json() for c in results]}


#: the files a report stem names: the JSON, the Markdown and (``eval bfcl``'s) the chart
REPORT_SUFFIXES: tuple[str, ...] = (".json", ".md", ".png")


def report_stem(path: Path) -> Path:
    """The stem a report path names: ``out``, ``out.json``, ``out.md`` and ``out.png`` all name ``out``."""
    return path.with_suffix("") if path.suffix in REPORT_SUFFIXES else path


def write_report(
    path: Path, rows: Sequence[ReportRow], results: Sequence[CaseResult], meta: dict[str, Any]
) -> list[Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` beside ``path``; returns the paths written."""
    base = report_stem(path)
    base.parent.mkdir(parents=True, exist_ok=True)
    json_path = base.with_name(base.name + ".json")
    md_path = base.with_name(base.name + ".md")
    write_whole(json_path, json.dumps(report_json(rows, results, meta), indent=2, default=str) + "\n")
    write_whole(md_path, render_markdown(rows, meta))
    return [json_path, md_path]
