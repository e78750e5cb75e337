"""``make quality``: the task suite and the single-turn BFCL categories, on one backend, one table.

Run before every change to the model-facing path (contract, dialects, guards, engine,
turn, enforcement, extension). Rows: the task suite by kind, the whole suite, then each
BFCL category (``json-action`` with the ``auto`` enforcement level, the defaults); columns:
cases, accuracy, protocol-valid, mean attempts (model calls per case), seconds per case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.core.backend import Backend, GenerationOptions
from agentfsm.eval.bfcl_data import CATEGORIES as BFCL_CATEGORIES
from agentfsm.eval.bfcl_data import load_cases
from agentfsm.eval.runner import CaseResult, EvalPlan, resolve_specs, run_eval
from agentfsm.eval.suite import TASKS, SuiteResult, SuiteTask, run_suite_task

__all__ = ["CATEGORIES", "COLUMNS", "QualityRow", "render_markdown", "rows_from", "run_quality", "run_tasks"]

#: the single-turn, non-live BFCL categories
CATEGORIES: tuple[str, ...] = tuple(c for c in BFCL_CATEGORIES if not c.startswith("live_"))
COLUMNS = ("category", "cases", "accuracy %", "protocol-valid %", "mean attempts", "s/case")


@dataclass(frozen=True)
class QualityRow:
    """One line of the quality table."""

    category: str
    cases: int
    accuracy: float
    protocol_valid: float
    mean_attempts: float
    seconds_per_case: float

    def cells(self) -> list[str]:
        """The row as table cells, in :data:`COLUMNS` order."""
        return [
            self.category,
            str(self.cases),
            f"{self.accuracy:.1f}",
            f"{self.protocol_valid:.1f}",
            f"{self.mean_attempts:.2f}",
            f"{self.seconds_per_case:.2f}",
        ]


def _row(category: str, valid: Sequence[bool], protocol: Sequence[bool], attempts: Sequence[int],
         seconds: Sequence[float]) -> QualityRow:
    n = len(valid)
    return QualityRow(
        category=category,
        cases=n,
        accuracy=100.0 * sum(valid) / n if n else 0.0,
        protocol_valid=100.0 * sum(protocol) / n if n else 0.0,
        mean_attempts=sum(attempts) / n if n else 0.0,
        seconds_per_case=sum(seconds) / n if n else 0.0,
    )


def rows_from(tasks: Sequence[SuiteResult], cases: Sequence[CaseResult]) -> list[QualityRow]:
    """Rows by task kind, the whole suite (``tasks``), then by BFCL category, in first-seen order."""
    rows: list[QualityRow] = []
    kinds = list(dict.fromkeys(t.task.kind for t in tasks))
    for kind in kinds:
        mine = [t for t in tasks if t.task.kind == kind]
        rows.append(_row(f"tasks: {kind}", [t.valid for t in mine], [t.protocol_valid for t in mine],
                         [t.attempts for t in mine], [t.seconds for t in mine]))
    if tasks:
        rows.append(_row("tasks", [t.valid for t in tasks], [t.protocol_valid for t in tasks],
                         [t.attempts for t in tasks], [t.seconds for t in tasks]))
    for category in dict.fromkeys(c.category for c in cases):
        mine_c = [c for c in cases if c.category == category]
        rows.append(_row(category, [c.valid for c in mine_c], [c.protocol_valid for c in mine_c],
                         [c.replies for c in mine_c], [c.seconds for c in mine_c]))
    return rows


async def run_tasks(
    backend: Backend,
    tasks: Sequence[SuiteTask] = TASKS,
    transcripts_dir: Path | None = None,
    on_result: Callable[[SuiteResult], None] | None = None,
) -> list[SuiteResult]:
    """Every task, in order (transcripts written as ``TASK.jsonl`` under ``transcripts_dir``)."""
    out: list[SuiteResult] = []
    for task in tasks:
        path = None
        if transcripts_dir is not None:
            transcripts_dir.mkdir(parents=True, exist_ok=True)
            path = transcripts_dir / f"{task.name}.jsonl"
            path.unlink(missing_ok=True)
        result = await run_suite_task(backend, task, transcript=path)
        out.append(result)
        if on_result is not None:
            on_result(result)
    return out


async def run_quality(
    backend: Backend,
    categories: Sequence[str] = CATEGORIES,
    limit: int = 15,
    tasks: Sequence[SuiteTask] = TASKS,
    transcripts_dir: Path | None = None,
    on_task: Callable[[SuiteResult], None] | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
    max_tokens: int = 256,
) -> tuple[list[SuiteResult], list[CaseResult]]:
    """The task suite, then the first ``limit`` cases of each BFCL category, with the defaults."""
    task_results = await run_tasks(
        backend, tasks, transcripts_dir / "tasks" if transcripts_dir else None, on_task
    )
    case_results: list[CaseResult] = []
    if categories:
        specs = resolve_specs(backend, "json-action", "auto", baseline=False)
        plan = EvalPlan(
            categories=tuple(categories),
            specs=specs,
            limit=limit,
            transcripts_dir=transcripts_dir / "bfcl" if transcripts_dir else None,
        )
        if plan.transcripts_dir is not None:
            plan.transcripts_dir.mkdir(parents=True, exist_ok=True)
        cases = [c for cat in categories for c in load_cases(cat, limit)]
        case_results = await run_eval(
            backend, plan, GenerationOptions(max_tokens=max_tokens), on_result=on_case, cases=cases
        )
    return task_results, case_results


def render_markdown(rows: Sequence[QualityRow], meta: dict[str, Any], failures: Sequence[str] = ()) -> str:
    """The table as Markdown, with how it was made, and the failed tasks."""
    lines = ["# Quality: the task suite and BFCL's single-turn categories", ""]
    if meta.get("command"):
        lines += ["Command:", "", "```", str(meta["command"]), "```", ""]
    for key in ("date", "backend", "machine", "bfcl_eval", "limit", "max_tokens", "commit"):
        if meta.get(key) is not None:
            lines.append(f"- {key}: {meta[key]}")
    lines += [
        "",
        "Defaults throughout: `json-action`, enforcement `auto`. Tasks run through `Agent` with "
        "deterministic fake tools and pass on the exact calls and the final answer; BFCL cases are "
        "one deciding turn scored by the port of BFCL's AST checker. Mean attempts: model calls per case.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * (len(COLUMNS) - 1),
    ]
    for r in rows:
        cells = r.cells()
        if r.category == "tasks":
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    if failures:
        lines += ["", "Failed tasks:", ""] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"
