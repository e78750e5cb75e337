"""The runs of a transcript, one at a time, from its events as they are read.

A transcript file may hold many runs (a proxy's, an agent's runs appended), and
runs may interleave (concurrent requests). :func:`runs_in_order` groups the events by
run id and hands each run over once it has ended (its ``run_end``), in the order the
runs began, so that a reader of thousands of runs holds the runs still going on and
not the whole file; each run is handed over as this release records it, where an older
one recorded the same thing otherwise (:func:`as_written_today`), so that replay, the
report and any other reader read it alike. Pure: events in, groups out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from agentfsm.core.events import ErrorEvent, ProxyRunConfig, RunEndEvent, RunStartEvent, TranscriptEvent

__all__ = ["RunEvents", "as_written_today", "runs_in_order"]

#: one run's events, each with its position among all the transcript's events
RunEvents = list[tuple[int, TranscriptEvent]]


def runs_in_order(events: Iterable[TranscriptEvent]) -> Iterator[RunEvents]:
    """Each run's ``(position, event)`` pairs, in order of the runs' first events.

    A run is given when it and every run begun before it have ended; runs that never
    end (cut off: their writer was killed) are given at the end. A ``run_end`` is a
    run's last event: an event of a run id already given begins another run.
    """
    open_runs: dict[str, RunEvents] = {}  # in order of first appearance
    ended: set[str] = set()
    for index, event in enumerate(events):
        open_runs.setdefault(event.run, []).append((index, event))
        if isinstance(event, RunEndEvent):
            ended.add(event.run)
            while open_runs:
                head = next(iter(open_runs))
                if head not in ended:
                    break
                ended.discard(head)
                yield as_written_today(open_runs.pop(head))
    for run in open_runs.values():
        yield as_written_today(run)


#: the ``error`` event the proxy wrote before version 4 for a client that left (then
#: ``run_end`` status ``error``); since, the run ends with status ``cancelled`` and no error
_CLIENT_LEFT = ("ConnectionAbortedError", "client disconnected")


def as_written_today(run: RunEvents) -> RunEvents:
    """``run`` as this release records it: a proxy request whose client left, recorded before
    version 4 as an error (``ConnectionAbortedError: client disconnected``, ``run_end``
    status ``error``), ends with ``run_end`` status ``cancelled`` and no ``error`` event, so
    that it reads as cut off (replay compares it as far as it goes; the report counts it
    as cancelled, not failed). Positions are kept; any other run is returned as it is."""
    if len(run) < 3:
        return run
    (_, start), (_, error), (end_at, end) = run[0], run[-2], run[-1]
    if (
        isinstance(start, RunStartEvent) and isinstance(start.config, ProxyRunConfig)
        and isinstance(error, ErrorEvent) and (error.error, error.message) == _CLIENT_LEFT and error.v < 4
        and isinstance(end, RunEndEvent) and end.status == "error"
    ):
        return [*run[:-2], (end_at, end.model_copy(update={"status": "cancelled"}))]
    return run
