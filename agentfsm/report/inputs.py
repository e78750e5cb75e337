"""What a report is built from: transcripts, batch results and replay output, read from disk.

``agentfsm report`` takes files and directories (as ``replay`` and ``diagram`` do: a
directory is searched for ``*.jsonl``, subdirectories included; not ``-``, standard
input: each file is read twice). Each file is told apart by its first line:

- a **transcript** (an event: ``type`` and ``run``): each of its runs is a row;
- a **batch results file** (``agentfsm batch -o``: ``id`` and ``ok``): each result is a
  row, read from the transcript it names (``--transcripts``) when there is one, its own
  figures otherwise; its outcome and error are the result's;
- **replay output** (``agentfsm replay --json``: ``path`` and ``identical``): each
  replayed transcript is read, and the event where today's code decided differently
  is marked in its run's timeline; a transcript replay could not read (``path`` and
  ``error``) is named in a note;
- a batch's **tasks file** (``id`` and ``prompt`` or ``messages``) is passed over: its
  results say what became of the tasks.

A transcript named by a results file or a replay report is shown once, with what
they say about it. A file that cannot be read is named in the report's notes, and
the rest is still shown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from agentfsm.batch.task import TaskResult
from agentfsm.core.errors import TranscriptError, UsageError
from agentfsm.core.runs import runs_in_order
from agentfsm.diagram.build import PathCounter, transcript_files
from agentfsm.replays.compare import ReplayReport
from agentfsm.report.runs import RunView, view_run
from agentfsm.diagram.order import checked_events

__all__ = ["FileKind", "Inputs", "Source", "classify", "gather", "read_runs"]

FileKind = Literal["transcript", "results", "replay", "tasks", "empty", "unknown"]


@dataclass
class Source:
    """One transcript to show, with what a batch result or a replay said about it."""

    path: Path | None
    result: TaskResult | None = None
    replay: ReplayReport | None = None


@dataclass
class Inputs:
    """Everything a report shows, in the order given."""

    sources: list[Source] = field(default_factory=list)
    #: files read, by kind (for the report's heading)
    kinds: dict[str, int] = field(default_factory=dict)
    #: files that could not be read, and why
    notes: list[str] = field(default_factory=list)
    #: built from replay output
    replayed: bool = False


def _first_line(path: Path) -> dict[str, Any] | None:
    """The first line that is not blank, as JSON (``{}`` when it is not a JSON object);
    None for a file with none. Only that line is decoded: a byte that is not UTF-8
    further on is the reader's to name, not a reason to call the file unknown."""
    try:
        with path.open("rb") as fh:
            for raw in fh:
                if raw.strip():
                    data = json.loads(raw.decode("utf-8"))
                    return data if isinstance(data, dict) else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return None


def classify(path: Path) -> FileKind:
    """What a ``*.jsonl`` file holds, from its first line."""
    first = _first_line(path)
    if first is None:
        return "empty"
    if "type" in first and "run" in first:
        return "transcript"
    if "path" in first and ("identical" in first or "error" in first):
        return "replay"  # a report, or a transcript replay could not read
    if "id" in first and "ok" in first:
        return "results"
    if "id" in first and ("prompt" in first or "messages" in first):
        return "tasks"  # a batch's tasks file: its results tell what became of them
    return "unknown"


def _lines(path: Path, notes: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a results or replay file, each with its line number. A line
    that is not UTF-8 or not JSON is named in ``notes`` and passed over, but for a torn
    last line (a killed writer), which is passed over silently: the rest still counts."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                notes.append(f"{path}:{number}: not UTF-8; line left out")
                continue
            except json.JSONDecodeError:
                if raw.endswith(b"\n"):
                    notes.append(f"{path}:{number}: not JSON; line left out")
                continue
            if isinstance(data, dict):
                yield number, data


def _named(raw: str | None, beside: Path) -> Path | None:
    """A transcript path as a results file or replay report wrote it.

    A relative path is relative to where that command ran, which is seldom where the
    report runs: ``agentfsm batch -o out/results.jsonl --transcripts out/runs`` names
    ``out/runs/t1.jsonl``. So it is looked for from the file naming it, with ever fewer
    of its leading parts (``out/out/runs/t1.jsonl``, ``out/runs/t1.jsonl``,
    ``out/t1.jsonl``), and then as given; an absolute path as given, then the same way.
    """
    if not raw:
        return None
    given = Path(raw)
    parts = given.parts[1:] if given.is_absolute() else given.parts
    candidates = [given] if given.is_absolute() else []
    candidates += [beside.parent.joinpath(*parts[k:]) for k in range(len(parts))]
    candidates.append(given)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    return None


#: why a report takes files only
_READ_TWICE = "a report reads each input twice; write it to a file first (zcat run.jsonl.gz > run.jsonl)"


def gather(paths: Iterable[str | os.PathLike[str]]) -> Inputs:
    """Find and classify the files named; pair transcripts with their results and replays."""
    files = list(dict.fromkeys(transcript_files(paths, no_stdin=_READ_TWICE)))
    if not files:
        raise UsageError("no transcripts given")
    for path in files:
        if not path.is_file():  # classified from its first line, then read: a pipe would lose that line
            raise UsageError(f"{path} is not a regular file: {_READ_TWICE}")
    inputs = Inputs()
    standalone: list[Path] = []
    claimed: dict[Path, Source] = {}
    for path in files:
        missing: list[str] = []  # transcripts a results file names that are not there
        kind = classify(path)
        inputs.kinds[kind] = inputs.kinds.get(kind, 0) + 1
        if kind == "transcript":
            standalone.append(path)
        elif kind in ("results", "replay"):
            for number, data in _lines(path, inputs.notes):
                if kind == "replay" and "error" in data and "identical" not in data:
                    inputs.notes.append(f"{path}:{number}: replay could not read {data.get('path')}: {data.get('message')}")
                    continue
                try:
                    if kind == "results":
                        result = TaskResult.model_validate(data)
                        source = Source(_named(result.transcript, path), result=result)
                    else:
                        report = ReplayReport.model_validate(data)
                        source = Source(_named(report.path, path), replay=report)
                        inputs.replayed = True
                except ValidationError as exc:
                    inputs.notes.append(f"{path}:{number}: not a {kind} line ({exc.errors()[0]['msg']})")
                    continue
                if source.path is None and source.result is not None and source.result.transcript:
                    missing.append(source.result.transcript)
                if source.path is not None:
                    key = source.path.resolve()
                    if key in claimed:  # a results file and a replay of the same transcript
                        claimed[key].result = claimed[key].result or source.result
                        claimed[key].replay = claimed[key].replay or source.replay
                        continue
                    claimed[key] = source
                elif source.replay is not None:
                    inputs.notes.append(f"{path}:{number}: replayed transcript {source.replay.path} not found")
                    continue
                inputs.sources.append(source)
            if missing:
                inputs.notes.append(
                    f"{path}: {len(missing)} transcript{'' if len(missing) == 1 else 's'} it names "
                    f"{'was' if len(missing) == 1 else 'were'} not found (first: {missing[0]}); "
                    "those runs are shown from their results only"
                )
        elif kind == "unknown":
            inputs.notes.append(f"{path}: not a transcript, batch results or replay output; left out")
    inputs.sources += [Source(p) for p in standalone if p.resolve() not in claimed]
    return inputs


def read_runs(path: Path, paths: PathCounter, notes: list[str] | None = None) -> list[RunView]:
    """The views of a transcript's runs, in order of appearance, its paths counted in
    ``paths``. The file is read once, a line at a time, and each run's events are let go
    once it is viewed: a transcript of thousands of runs is held one run at a time (and
    the runs still going on beside it). Raises :class:`TranscriptError` for a file that
    does not read. A run whose events are out of order is named in ``notes``
    (:mod:`agentfsm.diagram.order`)."""
    warn = notes.append if notes is not None else (lambda _: None)
    views = [view_run(run, str(path)) for run in runs_in_order(paths.count(checked_events(path, warn)))]
    if not views:
        raise TranscriptError(f"{path}: no events")
    return views
