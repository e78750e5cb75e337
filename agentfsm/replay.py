"""Replay: run a recorded transcript again through today's contract, parser, guards and engine.

The recorded ``model_output`` texts are served back in order (a
:class:`~agentfsm.backends.replay.ReplayBackend`) and every tool call is answered with
the recorded ``tool_result``, in order, so neither the model nor the tools are needed.
The *decision* events of the new run (``parse``, ``guard``, ``retry``, ``transition``,
``tool_call``, ``tool_result``, ``final``, ``error``) are compared field by field with
the recorded ones, ignoring ``v``, ``run``, ``seq`` and ``t``. The first difference is
the divergence, reported with its index in the recorded transcript::

    report = agentfsm.replay("runs/demo.jsonl")
    if not report.identical:
        print(report.divergence.index, report.divergence.then, report.divergence.now)

When today's engine asks for more model outputs (or tool results) than were recorded,
the run stops with an ``error`` event; that is a divergence, not a crash. A transcript
that holds several runs (the writer appends) is replayed run by run. A recorded run
that was cut off (no ``run_end``: its writer was killed) is compared only as far as
it goes.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentfsm.backends.base import Capabilities
from agentfsm.backends.replay import ReplayBackend
from agentfsm.errors import AgentFSMError, ToolExecutionError, TranscriptError, UsageError
from agentfsm.messages import Message, ToolCall, ToolResult, ToolSpec, parse_messages
from agentfsm.tools import RegisteredTool, ToolRegistry
from agentfsm.transcript import read_transcript

__all__ = [
    "DECISION_EVENTS",
    "Divergence",
    "ReplayReport",
    "areplay",
    "decision_events",
    "normalize_event",
    "replay",
]

#: the event types whose content is a decision of today's code, compared by replay
DECISION_EVENTS: frozenset[str] = frozenset(
    {"parse", "guard", "retry", "transition", "tool_call", "tool_result", "final", "error"}
)
_ENVELOPE = ("v", "run", "seq", "t")


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


def normalize_event(event: dict[str, Any]) -> dict[str, Any]:
    """An event without its envelope (``v``, ``run``, ``seq``, ``t``), as plain JSON."""
    plain: dict[str, Any] = json.loads(json.dumps(event, ensure_ascii=False, default=str))
    for key in _ENVELOPE:
        plain.pop(key, None)
    return plain


def decision_events(events: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """``(position, normalized event)`` for each decision event, in order."""
    return [(i, normalize_event(e)) for i, e in enumerate(events) if e.get("type") in DECISION_EVENTS]


class _RecordedTools(ToolRegistry):
    """A registry whose tools answer with the recorded results, in order."""

    def __init__(self, specs: Sequence[ToolSpec], results: Sequence[ToolResult]) -> None:
        super().__init__([RegisteredTool(spec, _never) for spec in specs])
        self._results = list(results)
        self._next = 0

    async def aexecute(self, call: ToolCall) -> ToolResult:
        if self._next >= len(self._results):
            raise ToolExecutionError(
                f"replay: no recorded tool result left for call {call.name!r} "
                f"(all {len(self._results)} were used)"
            )
        recorded = self._results[self._next]
        self._next += 1
        # The recorded content and status, addressed to today's call.
        return recorded.model_copy(update={"call_id": call.id, "name": call.name})


async def _never(_args: dict[str, Any]) -> Any:  # pragma: no cover - aexecute is overridden
    raise ToolExecutionError("replay tools are answered from the transcript")


def _backend_error_names() -> frozenset[str]:
    from agentfsm import errors
    from agentfsm.backends.scripted import ScriptExhausted

    names = {ScriptExhausted.__name__}
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, errors.BackendError):
            names.add(name)
    return frozenset(names)


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal decisions; a recorded backend failure matches running out of recorded output.

    When the model could not be reached, the recording has no output after that point,
    so today's run stops there for want of one: the same place, not a new decision.
    """
    if old == new:
        return True
    return (
        old.get("type") == new.get("type") == "error"
        and new.get("error") == "ScriptExhausted"
        and str(new.get("message", "")).startswith("replay transcript exhausted")
        and old.get("error") in _backend_error_names()
    )


def _runs(events: Sequence[dict[str, Any]]) -> list[tuple[str, list[int]]]:
    """Run ids in order of appearance, each with the positions of its events."""
    order: dict[str, list[int]] = {}
    for i, event in enumerate(events):
        order.setdefault(str(event.get("run", "")), []).append(i)
    return list(order.items())


def _first(events: Sequence[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((e for e in events if e.get("type") == type_), None)


def _capabilities(level: str, extended: bool) -> Capabilities:
    # Offer the backend exactly what the recorded level needed, so that today's ladder
    # resolves to the same level (prefill changes the text the engine sees), and list
    # continuations only where the run recorded extension steps.
    return Capabilities(
        prefill=level == "prefill", json_schema=level == "constrained", list_continuation=extended
    )


async def _replay_run(
    run_id: str, events: list[dict[str, Any]], positions: list[int], report: ReplayReport
) -> Divergence | None:
    from agentfsm.runtime import Agent  # runtime imports the whole stack; keep import cheap

    start = _first(events, "run_start")
    request = _first(events, "request")
    if start is None or request is None:
        raise TranscriptError(f"run {run_id!r} has no run_start/request event: cannot replay it")
    config: dict[str, Any] = dict(start.get("config") or {})
    try:
        history: list[Message] = parse_messages(request.get("messages") or [])
        specs = [ToolSpec.model_validate(t) for t in request.get("tools") or []]
        results = [
            ToolResult.model_validate(e["result"]) for e in events if e.get("type") == "tool_result"
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise TranscriptError(f"run {run_id!r}: malformed request or tool result: {exc}") from exc
    model_request = _first(events, "model_request")
    level = str((model_request or {}).get("enforcement") or "prompt")
    extended = any(e.get("type") == "model_request" and e.get("extension") for e in events)
    backend = ReplayBackend(events, capabilities=_capabilities(level, extended))
    longest = max((len(r.content) for r in results), default=0)
    new_events: list[dict[str, Any]] = []
    agent = Agent(
        backend,
        _RecordedTools(specs, results),
        dialect=str(config.get("dialect", "json-action")),
        tool_choice=str(request.get("tool_choice") or config.get("tool_choice") or "auto"),
        parallel=bool(config.get("parallel", True)),
        enforcement=str(config.get("enforcement", "auto")),
        max_steps=int(config.get("max_steps", 10)),
        result_max_chars=max(8000, longest + 1),
        on_event=new_events.append,
    )
    try:
        await agent.arun(history)
    except AgentFSMError:
        pass  # the runtime wrote it as an `error` event, which is compared below

    recorded_contract = _first(events, "contract")
    new_contract = _first(new_events, "contract")
    if (recorded_contract or {}).get("hash") != (new_contract or {}).get("hash"):
        report.contract_changed = True
    then = decision_events(events)
    now = [e for _, e in decision_events(new_events)]
    if report.decisions is not None:
        report.decisions.extend(now)
    complete = _first(events, "run_end") is not None
    if not complete:
        report.notes.append(f"run {run_id}: the recording has no run_end; compared as far as it goes")
    for k, (pos, old) in enumerate(then):
        report.compared += 1
        new = now[k] if k < len(now) else {}
        if not _same(old, new):
            return Divergence(
                index=positions[pos], event_type=str(old.get("type")), then=old, now=new, run=run_id
            )
    if complete and len(now) > len(then):
        extra = now[len(then)]
        return Divergence(
            index=(positions[-1] + 1) if positions else 0,
            event_type=str(extra.get("type")),
            then={},
            now=extra,
            run=run_id,
        )
    return None


async def areplay(path: str | os.PathLike[str], *, keep_decisions: bool = False) -> ReplayReport:
    """Replay a transcript file (async; safe inside a running event loop).

    ``keep_decisions`` also returns today's decision events in ``report.decisions``.
    """
    p = Path(path)
    events = read_transcript(p)
    report = ReplayReport(path=str(p), identical=True, decisions=[] if keep_decisions else None)
    runs = _runs(events)
    report.runs = len(runs)
    if not runs:
        raise TranscriptError(f"{p}: no events to replay")
    for run_id, positions in runs:
        divergence = await _replay_run(run_id, [events[i] for i in positions], positions, report)
        if divergence is not None:
            report.identical = False
            report.divergence = divergence
            break
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
