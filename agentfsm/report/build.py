"""Build the report: read the inputs once, aggregate the diagram, lay out the page data.

:func:`build_report` returns the page (one self-contained HTML text) and
:class:`ReportStats` (what it holds); :func:`write_report` also writes it. Every
transcript is read once: the same typed events feed the observed diagram
(:class:`agentfsm.diagram.build.PathCounter`) and the runs' rows and timelines
(:mod:`agentfsm.report.runs`), and each run's events are let go once it is viewed: what a
report holds in memory is its rows and counts, never its transcripts' events.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentfsm.core.errors import TranscriptError, UsageError
from agentfsm.diagram.build import PathCounter
from agentfsm.report.inputs import Inputs, Source, gather, read_runs
from agentfsm.report.page import render_page
from agentfsm.report.runs import RunView, clip
from agentfsm.report.svg import diagram_svg, edge_key
from agentfsm.runtime.files import write_whole
from agentfsm.runtime.transcript import os_error_reason

__all__ = ["ReportStats", "build_report", "page_data", "write_report"]


@dataclass(frozen=True)
class ReportStats:
    """What a built report holds."""

    runs: int
    transcripts: int
    failed: int
    notes: tuple[str, ...]
    size: int = 0


def _error_class(error: str | None) -> str:
    return (error or "error").split(":", 1)[0].strip() or "error"


def _from_result(view: RunView, source: Source) -> None:
    """What a batch result says overrides what its transcript does (it saw the whole task)."""
    result = source.result
    if result is None:
        return
    view.task = result.id
    view.seconds = result.seconds
    if not result.ok:
        view.outcome, view.reason, view.error = "failed", _error_class(result.error), clip(result.error, 300)
    elif view.outcome in ("failed", "incomplete"):
        view.outcome, view.reason = ("exhausted", "exhausted") if view.exhausted else ("ok", "")


def _result_only(source: Source) -> RunView:
    """A batch result whose run wrote no transcript: its own figures, no timeline."""
    result = source.result
    assert result is not None
    view = RunView(id=result.id, file="", producer="batch", task=result.id, steps=result.steps,
                   corrections=result.corrections, model_calls=result.steps, seconds=result.seconds,
                   tokens_in=result.usage.get("prompt_tokens", 0),
                   tokens_out=result.usage.get("completion_tokens", 0),
                   prompt="", guard_reasons=sorted(result.guards))
    view.outcome = "ok" if result.ok else "failed"
    if not result.ok:
        view.reason, view.error = _error_class(result.error), clip(result.error, 300)
    if result.transcript:
        note = f"its transcript {result.transcript} was not found, neither as given nor beside the results file"
    else:
        note = "no transcript was written for this task (run the batch with --transcripts DIR)"
    view.items.append({"k": "note", "text": note})
    return view


def _mark_replay(views: list[RunView], source: Source) -> dict[str, dict[str, Any]]:
    """Each run's replay verdict; the divergence, by run id, for the run that diverged."""
    report = source.replay
    if report is None:
        return {}
    divergence = report.divergence
    verdict = "identical"
    marks: dict[str, dict[str, Any]] = {}
    for view in views:
        if divergence is not None and view.id == divergence.run:
            view.replay, verdict = "diverged", "not replayed"  # replay stops at the first divergence
            marks[view.id] = divergence.model_dump(mode="json")
        else:
            view.replay = verdict
    return marks


def _views(source: Source, inputs: Inputs, paths: PathCounter) -> tuple[list[RunView], dict[str, Any]]:
    """The source's runs, their paths counted in ``paths`` (unless its transcript does not
    read: then nothing of it is counted, and its result alone is shown)."""
    if source.path is None:
        return ([_result_only(source)] if source.result is not None else []), {}
    counted = PathCounter()
    try:
        views = read_runs(source.path, counted, inputs.notes)
    except TranscriptError as exc:
        inputs.notes.append(str(exc))
        return ([_result_only(source)] if source.result is not None else []), {}
    paths.merge(counted)
    for view in views:
        _from_result(view, source)
    return views, _mark_replay(views, source)


def page_data(inputs: Inputs, on_source: Callable[[int, int], None] | None = None) -> tuple[dict[str, Any], str, ReportStats]:
    """The page's JSON data, its diagram's SVG, and the stats, from gathered inputs;
    ``on_source(done, total)`` is told after each source is read (a progress bar)."""
    views: list[RunView] = []
    paths = PathCounter()
    divergences: dict[tuple[int, str], dict[str, Any]] = {}
    for done, source in enumerate(inputs.sources, start=1):
        found, marks = _views(source, inputs, paths)
        if on_source is not None:
            on_source(done, len(inputs.sources))
        base = len(views)
        for k, view in enumerate(found):
            if view.id in marks:
                divergences[(base + k, view.id)] = marks[view.id]
        views += found
    if not views:
        raise UsageError("no runs to report: " + ("; ".join(inputs.notes) or "the inputs hold no events"))
    diagram = paths.diagram()
    edge_keys = [edge_key(e.source, e.dest, e.event) for e in diagram.edges]
    edge_index = {key: i for i, key in enumerate(edge_keys)}
    contracts: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    failures: dict[str, list[int]] = {}
    corrections: dict[str, list[int]] = {}
    for n, view in enumerate(views):
        row = view.row()
        row["edges"] = [edge_index[k] for k in (edge_key(*e) for e in view.edges) if k in edge_index]
        if (n, view.id) in divergences:
            row["divergence"] = divergences[(n, view.id)]
        rows.append(row)
        for digest, text in view.contracts.items():
            contracts.setdefault(digest, text)
        if view.outcome != "ok":
            failures.setdefault(view.reason or view.outcome, []).append(n)
        for reason in view.guard_reasons:
            corrections.setdefault(reason, []).append(n)
    data = {
        "title": diagram.title.replace("agentfsm observed paths", "agentfsm report"),
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "kinds": inputs.kinds,
        "notes": inputs.notes,
        "replayed": inputs.replayed,
        "edges": edge_keys,
        "runs": rows,
        "contracts": contracts,
        "failures": _groups(failures, rows),
        "corrections": _groups(corrections, rows),
    }
    failed = sum(1 for v in views if v.outcome == "failed")
    stats = ReportStats(runs=len(views), transcripts=paths.files, failed=failed, notes=tuple(inputs.notes))
    return data, diagram_svg(diagram), stats


def _groups(groups: dict[str, list[int]], rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups of runs by reason, largest first, each with its outcomes counted."""
    out = []
    for reason, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        outcomes: dict[str, int] = {}
        for n in members:
            outcomes[rows[n]["outcome"]] = outcomes.get(rows[n]["outcome"], 0) + 1
        out.append({"reason": reason, "runs": members, "outcomes": outcomes})
    return out


def build_report(
    paths: Iterable[str | os.PathLike[str]], on_source: Callable[[int, int], None] | None = None
) -> tuple[str, ReportStats]:
    """The report on ``paths`` (transcripts, directories, batch results, replay output);
    ``on_source(done, total)`` is told as the sources are read."""
    inputs = gather(paths)
    data, svg, stats = page_data(inputs, on_source)
    html = render_page(data, svg)
    return html, ReportStats(stats.runs, stats.transcripts, stats.failed, stats.notes, len(html.encode()))


def write_report(
    paths: Iterable[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    on_source: Callable[[int, int], None] | None = None,
) -> ReportStats:
    """Build the report and write it to ``output`` (one HTML file)."""
    html, stats = build_report(paths, on_source)
    out = Path(output)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {os_error_reason(exc, out)}") from exc
    write_whole(out, html)  # a full disk leaves the page that was there, not half of the new one
    return stats
