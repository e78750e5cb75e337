"""Diagrams of the machine, and of the paths that runs actually took.

Both come from data, never from a drawing: the machine from
:data:`agentfsm.core.machine.TRANSITIONS`, the observed paths from the ``transition``,
``retry`` and ``guard`` events of transcripts. Everything here is pure (values in,
text out) except :func:`transcript_files` and :func:`observed_diagram`, which read
transcript files, and :func:`render`, which runs graphviz's ``dot``.

Mermaid text needs nothing extra; SVG and PNG need graphviz (``dot`` on ``PATH``);
when it is missing :func:`render` raises :class:`GraphvizMissing`, which says how to
install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from agentfsm.diagram.model import Diagram, DiagramEdge, DiagramNode
from agentfsm.diagram.text import document_markdown, to_graphviz_dot, to_mermaid
from agentfsm.core.errors import GraphvizMissing, TranscriptError, UsageError
from agentfsm.core.machine import TRANSITIONS
from agentfsm.core.states import State, derive_state
from agentfsm.core.events import GuardEvent, RequestEvent, RetryEvent, TranscriptEvent, TransitionEvent
from agentfsm.diagram.order import RunKeys, checked_events

__all__ = [
    "Diagram",
    "DiagramEdge",
    "DiagramNode",
    "GraphvizMissing",
    "PathCounter",
    "RenderFormat",
    "document_markdown",
    "machine_diagram",
    "machine_mermaid",
    "observe",
    "observed_diagram",
    "observed_mermaid",
    "render",
    "to_graphviz_dot",
    "to_mermaid",
    "STDIN",
    "transcript_files",
]

RenderFormat = Literal["svg", "png"]

_REFUSAL = "refusal"


def _machine_edges() -> list[DiagramEdge]:
    edges: list[DiagramEdge] = []
    for spec in TRANSITIONS:
        guards = tuple(spec["conditions"]) + tuple(f"not {name}" for name in spec.get("unless", []))
        for source in spec["source"]:
            edges.append(DiagramEdge(source, spec["dest"], spec["trigger"], guards))
    return edges


def machine_diagram() -> Diagram:
    """The machine itself: states, events and guard conditions, from TRANSITIONS."""
    return Diagram(
        title="agentfsm machine",
        nodes=tuple(DiagramNode(state.value) for state in State),
        edges=tuple(_machine_edges()),
        starts=((State.FIRST_DECISION.value, None),),
    )


class PathCounter:
    """The observed diagram's counts, one transcript at a time: :meth:`add` each
    transcript's events as it is read, then :meth:`diagram`. Nothing of a transcript is
    kept but its counts, so a caller that reads thousands of them holds one at a time.
    """

    def __init__(self) -> None:
        self.taken: Counter[tuple[str, str, str]] = Counter()
        self.entered: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.refusals: Counter[str] = Counter()
        self.starts: Counter[str] = Counter()
        self.runs = 0
        self.files = 0

    def add(self, events: Iterable[TranscriptEvent]) -> None:
        """Count one transcript's paths (its runs are told apart by their ``run`` id)."""
        for _ in self.count(events):
            pass

    def count(self, events: Iterable[TranscriptEvent]) -> Iterator[TranscriptEvent]:
        """:meth:`add` as the events go by: each is counted and passed on, for a reader
        that does more with them (the report views each run)."""
        self.files += 1
        current: dict[tuple[str, int], str | None] = {}
        requested: dict[tuple[str, int], str] = {}  # a run's state before its first transition
        # a run_end is a run's last event: its id again begins another run (a file joined
        # to itself), as runs_in_order, replay and the report read it
        run_of = RunKeys()
        for event in events:
            run = run_of(event)
            if run not in current:
                current[run] = None
                self.runs += 1
            match event:
                case RequestEvent(messages=messages) if run not in requested:
                    requested[run] = derive_state(messages).value
                case TransitionEvent(from_=source, event=name, to=dest):
                    if current[run] is None:
                        self.starts[source] += 1
                        self.entered[source] += 1
                    self.taken[(source, dest, name)] += 1
                    self.entered[dest] += 1
                    current[run] = dest
                case RetryEvent():
                    self.retries[current[run] or State.FIRST_DECISION.value] += 1
                case GuardEvent() if event.verdict != "accept":
                    if _REFUSAL in f"{event.guard} {event.reason}".lower():
                        self.refusals[current[run] or State.FIRST_DECISION.value] += 1
            yield event
        for run, state in current.items():
            if state is None:  # started, and ended (an error) or was cut off before a move
                start = requested.get(run, State.FIRST_DECISION.value)
                self.starts[start] += 1
                self.entered[start] += 1

    def merge(self, other: PathCounter) -> None:
        """Add the counts of ``other`` (the transcripts it counted) to these."""
        self.taken.update(other.taken)
        self.entered.update(other.entered)
        self.retries.update(other.retries)
        self.refusals.update(other.refusals)
        self.starts.update(other.starts)
        self.runs += other.runs
        self.files += other.files

    def diagram(self) -> Diagram:
        """The diagram of every transcript added so far."""
        taken = self.taken
        edges: list[DiagramEdge] = []
        known: set[tuple[str, str, str]] = set()
        for edge in _machine_edges():
            key = (edge.source, edge.dest, edge.event)
            known.add(key)
            edges.append(DiagramEdge(edge.source, edge.dest, edge.event, edge.guards, taken[key]))
        for (source, dest, name), count in sorted(taken.items()):
            if (source, dest, name) not in known:
                edges.append(DiagramEdge(source, dest, name, (), count, in_machine=False))
        states = [state.value for state in State]
        states += sorted({s for key in taken for s in key[:2]} - set(states))
        nodes = tuple(
            DiagramNode(s, self.entered[s], self.retries[s], self.refusals[s]) for s in states
        )
        runs, files = self.runs, self.files
        plural = "" if runs == 1 else "s"
        return Diagram(
            title=f"agentfsm observed paths ({runs} run{plural} in {files} transcript{'' if files == 1 else 's'})",
            nodes=nodes,
            edges=tuple(edges),
            starts=tuple((s, self.starts[s]) for s in states if self.starts[s]),
            observed=True,
            runs=runs,
            transcripts=files,
        )


def observe(transcripts: Iterable[Iterable[TranscriptEvent]]) -> Diagram:
    """Aggregate the paths of transcripts (each an iterable of events) into a diagram.

    Each ``transition`` event counts once on its edge; a ``retry`` counts in the
    state its run was in; a ``guard`` verdict other than ``accept`` whose guard or
    reason names a refusal counts as a refusal there. Runs are told apart by their
    ``run`` id within each transcript (the id again after its ``run_end`` is another run). A run that never moved (its model could not be
    reached before the first decision) still started: in the state its request's
    conversation was in, so the start counts every run the title does. The
    transcripts are taken one at a time (:class:`PathCounter`).
    """
    counter = PathCounter()
    for events in transcripts:
        counter.add(events)
    return counter.diagram()


#: the name that stands for standard input among the paths given
STDIN = "-"


def transcript_files(paths: Iterable[str | os.PathLike[str]], *, no_stdin: str | None = None) -> list[Path]:
    """The transcript files named: files as given, and every ``*.jsonl`` in a directory and
    its subdirectories (sorted by path), as ``replay``, ``diagram`` and ``report`` all take
    them. A path that is not a directory is taken as it is, so that a pipe reads
    (``/dev/stdin``, ``<(zcat run.jsonl.gz)``); ``-`` is standard input, read as
    ``/dev/stdin`` (a file named ``-`` is ``./-``), unless ``no_stdin`` says why it is not taken.
    A file named twice (``runs/`` and ``runs/a.jsonl``, or by another spelling of its path)
    is taken once, where first named: its runs are counted once in a diagram, as in a report."""
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        if os.fspath(raw) == STDIN:
            if no_stdin is not None:
                raise UsageError(f"- (standard input) is not taken: {no_stdin}")
            if not Path("/dev/stdin").exists():
                raise UsageError("- (standard input) cannot be read as a file on this system: write it to a file first")
            inside = [Path("/dev/stdin")]
        elif (path := Path(raw)).is_dir():
            inside = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not inside:
                raise UsageError(f"no *.jsonl transcripts in directory {path} (nor in its subdirectories)")
        elif path.exists():  # a file, or a pipe: /dev/stdin, <(zcat runs.jsonl.gz)
            inside = [path]
        else:
            raise UsageError(f"no such transcript file or directory: {path}")
        for file in inside:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                found.append(file)
    return found


def observed_diagram(
    paths: Sequence[str | os.PathLike[str]],
    on_file: Callable[[int, int], None] | None = None,
    on_skip: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> Diagram:
    """Read transcripts (files, or directories of ``*.jsonl``) and aggregate their paths;
    ``on_file(done, total)`` is told after each file (a progress bar). A file that does
    not read is a :class:`TranscriptError`; with ``on_skip``, it is told why instead and
    the file is left out whole (none of its runs counted, as ``agentfsm report`` does).
    ``on_warning`` is told of a run whose events are out of order (``FILE:LINE``), which
    is still drawn, in file order (:mod:`agentfsm.diagram.order`)."""

    files = transcript_files(paths)
    if not files:
        raise UsageError("no transcripts given")
    counter = PathCounter()
    skipped: list[str] = []
    for done, path in enumerate(files, start=1):
        one = PathCounter()
        try:
            one.add(checked_events(path, on_warning or (lambda _: None)))
            if not one.runs and on_skip is not None:
                raise TranscriptError(f"{path}: no events")  # an empty file, named as report names it
        except TranscriptError as exc:
            if on_skip is None:
                raise
            skipped.append(str(exc))
            on_skip(str(exc))
        else:
            counter.merge(one)
        if on_file is not None:
            on_file(done, len(files))
    diagram = counter.diagram()
    if not diagram.runs:  # empty files, or none that reads: nothing observed, as replay and report say
        if skipped:
            raise UsageError("no runs to draw: " + "; ".join(skipped))
        raise UsageError(f"no runs to draw: the transcript{'' if len(files) == 1 else 's'} hold{'s' if len(files) == 1 else ''} no events")
    return diagram


def machine_mermaid() -> str:
    """The machine as a mermaid ``stateDiagram-v2``."""
    return to_mermaid(machine_diagram())


def observed_mermaid(paths: Sequence[str | os.PathLike[str]]) -> str:
    """The observed paths of transcripts as a mermaid flowchart with counts."""
    return to_mermaid(observed_diagram(paths))


def render(fmt: RenderFormat, dot_source: str, out: Path | None = None) -> bytes:
    """Run graphviz's ``dot`` to turn DOT text into SVG or PNG; write it to ``out`` if given."""
    if fmt not in ("svg", "png"):
        raise UsageError(f"render needs svg or png, not {fmt!r}")
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizMissing(fmt)
    try:
        done = subprocess.run(
            [dot, f"-T{fmt}"], input=dot_source.encode(), capture_output=True, check=False, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"could not run graphviz dot: {exc}") from exc
    if done.returncode != 0:
        raise UsageError(f"graphviz dot failed: {done.stderr.decode(errors='replace').strip()}")
    if out is not None:
        out.write_bytes(done.stdout)
    return done.stdout
