"""Replay: run a recorded transcript again through today's contract, parser, guards and engine.

The recorded ``model_output`` texts are served back in order (a
:class:`~agentfsm.replays.backend.ReplayBackend`) and every tool call is answered with
the recorded ``tool_result``, in order, so neither the model nor the tools are needed.
The *decision* events of the new run (``parse``, ``guard``, ``retry``, ``transition``,
``tool_call``, ``tool_result``, ``final``, ``error``) are compared field by field with
the recorded ones, ignoring ``v``, ``run``, ``seq`` and ``t``. The first difference is
the divergence, reported with its index in the recorded transcript::

    report = agentfsm.replays.compare("runs/demo.jsonl")
    if not report.identical:
        print(report.divergence.index, report.divergence.then, report.divergence.now)

Each run is run again the way its producer ran it (:mod:`agentfsm.replays.rerun`): an
agent or batch run through the agent, a proxy request through the proxy's exchange
(streamed or not, as recorded), an eval case through the benchmark's deciding turn.
The ids the proxy mints for its client's calls are random, so they are not compared.

When today's engine asks for more model outputs (or tool results) than were recorded,
the run stops with an ``error`` event; that is a divergence, not a crash. A transcript
that holds several runs (the writer appends) is replayed run by run, each read and let go
in turn (:func:`~agentfsm.core.runs.runs_in_order`). A recorded run
that was cut off (no ``run_end``: its writer was killed; or ``run_end`` status
``cancelled``: its task was cancelled, Ctrl-C, the proxy's client left) is compared only
as far as it goes; so is a proxy request recorded before version 4 as the error
``ConnectionAbortedError: client disconnected`` (:func:`~agentfsm.core.runs.as_written_today`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentfsm.core.errors import ScriptExhausted, TranscriptError, UsageError
from agentfsm.core.events import (
    DECISION_TYPES,
    ContractEvent,
    ErrorEvent,
    ProxyRunConfig,
    RequestEvent,
    RunEndEvent,
    ToolCallEvent,
    TranscriptEvent,
    event_fields,
)
from agentfsm.core.runs import runs_in_order
from agentfsm.replays.rerun import RecordedRun, rerun
from agentfsm.diagram.order import checked_events

__all__ = [
    "DECISION_EVENTS",
    "Divergence",
    "ReplayReport",
    "areplay",
    "decision_events",
    "replay",
]

#: the event types whose content is a decision of today's code, compared by replay
DECISION_EVENTS: frozenset[str] = DECISION_TYPES


class Divergence(BaseModel):
    """Where a replay first decided differently from the recording."""

    #: position of the recorded event in the transcript (0-based, over all its events);
    #: the transcript's length when today's run decided more than was recorded
    index: int
    #: the recorded event's type (or today's, when the recording had nothing there)
    event_type: str
    #: the recorded decision (envelope removed); empty when the recording had none
    then: dict[str, Any] = Field(default_factory=dict)
    #: today's decision (envelope removed); empty when today's run had none
    now: dict[str, Any] = Field(default_factory=dict)
    #: the recorded run id
    run: str = ""


class ReplayReport(BaseModel):
    """The outcome of replaying one transcript file."""

    path: str
    identical: bool
    divergence: Divergence | None = None
    #: today's rendered contract differs from the recorded one (hash comparison)
    contract_changed: bool = False
    #: how many decision events were compared
    compared: int = 0
    #: how many runs the file held
    runs: int = 0
    notes: list[str] = Field(default_factory=list)
    #: today's decision events (envelope removed), only when asked for (``keep_decisions``)
    decisions: list[dict[str, Any]] | None = None


def decision_events(events: Sequence[TranscriptEvent]) -> list[tuple[int, TranscriptEvent]]:
    """``(position, event)`` for each decision event, in order."""
    return [(i, e) for i, e in enumerate(events) if e.type in DECISION_TYPES]


def _backend_error_names() -> frozenset[str]:
    from agentfsm.core import errors

    names = set()
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.BackendError):
            names.add(name)
    return frozenset(names)


def _comparable(event: TranscriptEvent, minted_ids: bool) -> dict[str, Any]:
    """The decision as compared: its fields without the envelope, and for the proxy
    without the call id (the proxy hands its client calls under freshly minted random
    ids: an id is not a decision)."""
    if minted_ids and isinstance(event, ToolCallEvent):
        event = event.model_copy(update={"call": event.call.model_copy(update={"id": "(minted by the proxy)"})})
    return event_fields(event)


def _same(old: TranscriptEvent, new: TranscriptEvent | None, minted_ids: bool) -> bool:
    """Equal decisions; a recorded backend failure matches running out of recorded output.

    When the model could not be reached, the recording has no output after that point,
    so today's run stops there for want of one: the same place, not a new decision.
    """
    if new is None:
        return False
    if _comparable(old, minted_ids) == _comparable(new, minted_ids):
        return True
    return (
        isinstance(old, ErrorEvent)
        and isinstance(new, ErrorEvent)
        and new.error == ScriptExhausted.__name__
        and new.message.startswith("replay transcript exhausted")
        and old.error in _backend_error_names()
    )


def _contract_hash(events: Sequence[TranscriptEvent]) -> str | None:
    return next((e.hash for e in events if isinstance(e, ContractEvent)), None)


async def _replay_run(run: RecordedRun, positions: list[int], report: ReplayReport) -> Divergence | None:
    minted_ids = isinstance(run.config, ProxyRunConfig)
    end = next((e for e in run.events if isinstance(e, RunEndEvent)), None)
    complete = end is not None and end.status != "cancelled"
    if end is None:
        report.notes.append(f"run {run.run_id}: the recording has no run_end; compared as far as it goes")
    elif not complete:
        report.notes.append(f"run {run.run_id}: the recorded run was cancelled; compared as far as it goes")
    if not complete and not any(isinstance(e, RequestEvent) for e in run.events):
        return None  # cut off before its request was written whole (a torn request line): nothing was decided
    new_events = await rerun(run)
    recorded_contract = _contract_hash(run.events)
    # a recording cut off before its contract says nothing about it
    if recorded_contract is not None and recorded_contract != _contract_hash(new_events):
        report.contract_changed = True
    then = decision_events(run.events)
    now = [e for _, e in decision_events(new_events)]
    if report.decisions is not None:
        report.decisions.extend(event_fields(e) for e in now)
    for k, (pos, old) in enumerate(then):
        report.compared += 1
        new = now[k] if k < len(now) else None
        if not _same(old, new, minted_ids):
            return Divergence(
                index=positions[pos],
                event_type=old.type,
                then=event_fields(old),
                now=event_fields(new) if new is not None else {},
                run=run.run_id,
            )
    if complete and len(now) > len(then):
        extra = now[len(then)]
        return Divergence(
            index=(positions[-1] + 1) if positions else 0,
            event_type=extra.type,
            then={},
            now=event_fields(extra),
            run=run.run_id,
        )
    return None


async def areplay(path: str | os.PathLike[str], *, keep_decisions: bool = False) -> ReplayReport:
    """Replay a transcript file (async; safe inside a running event loop).

    ``keep_decisions`` also returns today's decision events in ``report.decisions``.
    """
    p = Path(path)
    report = ReplayReport(path=str(p), identical=True, decisions=[] if keep_decisions else None)
    # a run at a time: a proxy's file holds thousands; a run out of order is named in a note
    runs = runs_in_order(checked_events(p, report.notes.append))
    for recorded in runs:  # each as written today: a client that left before version 4 is cut off
        report.runs += 1
        run_id = recorded[0][1].run
        run = RecordedRun(run_id, tuple(event for _, event in recorded))
        try:
            divergence = await _replay_run(run, [position for position, _ in recorded], report)
        except TranscriptError as exc:  # a run that cannot be set up again (no run_start):
            raise TranscriptError(f"{p}: {exc}") from exc  # named with its file, one of hundreds
        except UsageError as exc:  # recorded settings that today's configuration refuses
            raise TranscriptError(f"{p}: run {run_id}: the recorded settings do not read: {exc}") from exc
        if divergence is not None:
            report.identical = False
            report.divergence = divergence
            report.runs += sum(1 for _ in runs)  # the rest are counted, not replayed
            break
    if not report.runs:
        raise TranscriptError(f"{p}: no events to replay")
    if report.contract_changed:
        report.notes.append("today's contract text differs from the recorded one")
    return report


def replay(path: str | os.PathLike[str], *, keep_decisions: bool = False) -> ReplayReport:
    """Replay a transcript file (blocking). Inside a running event loop use :func:`areplay`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(areplay(path, keep_decisions=keep_decisions))
    raise UsageError("replay() was called inside a running event loop; await areplay() instead")
