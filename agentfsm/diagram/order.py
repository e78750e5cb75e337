"""A transcript's events with a check of their order: each run's ``seq`` must increase.

The writer numbers a run's events from 0 as it writes them, so a run whose ``seq`` goes
back was put together out of order (files joined by hand, lines sorted, a tool that
rewrote them). Read in file order, such a run would be drawn and replayed wrong without a
word: a transition before the one it follows starts the run in the wrong state. So the
reviewer's readers (``replay``, ``diagram``, ``report``) take the events through
:func:`checked_events`, which says where it first happens (``FILE:LINE``) and how many
more runs of the file are out of order, and passes the events on as they are, in file order.

``seq`` may skip numbers (a writer told to keep only some event types); only a number
not above the one before is out of order. A ``run_end`` is a run's last event: its id
again begins another run, numbered from 0 again (a file joined to itself).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from agentfsm.core.events import RunEndEvent, TranscriptEvent
from agentfsm.runtime.transcript import iter_events

__all__ = ["RunKeys", "checked_events", "line_of"]


class RunKeys:
    """Each event's run as a key, ``(run id, how many runs of that id ended before)``: a
    ``run_end`` is a run's last event, so its id again begins another run."""

    def __init__(self) -> None:
        self._ended: dict[str, int] = {}

    def __call__(self, event: TranscriptEvent) -> tuple[str, int]:
        key = (event.run, self._ended.get(event.run, 0))
        if isinstance(event, RunEndEvent):
            self._ended[event.run] = key[1] + 1
        return key


def line_of(path: Path, index: int) -> str:
    """``FILE:LINE`` of the event at ``index`` (0-based, over the events read): blank lines
    are passed over as the reader passes them. A file that cannot be read again (a pipe)
    is named with the event's place instead (``FILE: event N``)."""
    if path.is_file():
        try:
            with path.open("rb") as fh:
                seen = -1
                for number, raw in enumerate(fh, start=1):
                    if raw.strip():
                        seen += 1
                        if seen == index:
                            return f"{path}:{number}"
        except OSError:
            pass
    return f"{path}: event {index + 1}"


def checked_events(path: str | os.PathLike[str], warn: Callable[[str], None]) -> Iterator[TranscriptEvent]:
    """:func:`~agentfsm.runtime.transcript.iter_events`, and ``warn`` told where a run's
    ``seq`` first does not increase: the file's first such run by its line, and how many
    more runs there were once the file is read (a file is read again at most once, to find
    that line)."""
    p = Path(path)
    last: dict[tuple[str, int], int] = {}
    run_of = RunKeys()
    disordered: set[tuple[str, int]] = set()
    for index, event in enumerate(iter_events(p)):
        run = run_of(event)
        before = last.get(run)
        if before is not None and event.seq <= before and run not in disordered:
            if not disordered:
                warn(
                    f"{line_of(p, index)}: run {event.run}: seq {event.seq} after seq {before}: "
                    "its events are out of order; read in file order"
                )
            disordered.add(run)
        last[run] = event.seq if before is None else max(before, event.seq)
        yield event
    if len(disordered) > 1:
        more = len(disordered) - 1
        warn(f"{p}: {more} more run{'' if more == 1 else 's'} out of order; read in file order")
