"""One run of a transcript as the report shows it: its table row and its timeline.

Pure: typed events (:mod:`agentfsm.core.events`) in, plain JSON-ready values out. The
timeline keeps what a reviewer reads (the request, the contract by hash, each model
output with the calls parsed from it, guard verdicts, corrections, calls, results,
the answer) and leaves out what only replay needs (each model request's whole
prompt, which repeats the contract and the history on every attempt). Long texts are
cut at :data:`TEXT_LIMIT` characters, saying how much was cut, so that a report of
thousands of runs stays small.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from agentfsm.core.events import (
    BatchRunConfig,
    ContractEvent,
    ErrorEvent,
    FinalEvent,
    GuardEvent,
    ModelOutputEvent,
    ModelRequestEvent,
    ParseEvent,
    RequestEvent,
    RetryEvent,
    RunEndEvent,
    RunStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TranscriptEvent,
    TransitionEvent,
)
from agentfsm.core.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage

__all__ = [
    "CONTRACT_LIMIT",
    "Outcome",
    "RunView",
    "TEXT_LIMIT",
    "clip",
    "view_run",
]

#: characters of one text (a model output, a result, a message) kept in a report
TEXT_LIMIT = 2000
#: characters of a contract kept (each distinct contract is stored once)
CONTRACT_LIMIT = 20000

#: how a run ended, as the report's outcome filter names it
Outcome = Literal["ok", "exhausted", "failed", "incomplete"]


def clip(text: str | None, limit: int = TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with a note saying how many were left out."""
    if not text:
        return ""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


@dataclass
class RunView:
    """A run: the figures of its table row, its timeline, and what it costs to show."""

    id: str
    file: str
    producer: str = ""
    outcome: Outcome = "incomplete"
    #: why a run that did not end well ended so: an error's class, ``exhausted``, ``incomplete``
    #: (cut off: no ``run_end``), ``cancelled`` (its ``run_end`` says so)
    reason: str = ""
    error: str = ""
    #: deciding model calls (the run's ``steps``)
    steps: int = 0
    corrections: int = 0
    #: model calls answered: deciding ones and consensus candidates
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    exhausted: bool = False
    #: reasons of the guard verdicts that corrected or stopped a reply, in order, once each
    guard_reasons: list[str] = field(default_factory=list)
    #: the machine edges taken, as ``(source, dest, event)``, in order, once each
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    #: the request's last user message, for the table (clipped)
    prompt: str = ""
    #: batch task id, when the run came with a batch result
    task: str = ""
    #: ``identical``, ``diverged`` or ``not replayed`` when built from replay output
    replay: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    #: the contracts the run recorded, by hash (a report stores each once)
    contracts: dict[str, str] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The run as the page's JSON (its contracts apart: see :attr:`contracts`)."""
        return {
            "id": self.id,
            "file": self.file,
            "producer": self.producer,
            "outcome": self.outcome,
            "reason": self.reason,
            "error": self.error,
            "steps": self.steps,
            "corrections": self.corrections,
            "calls": self.model_calls,
            "tin": self.tokens_in,
            "tout": self.tokens_out,
            "seconds": round(self.seconds, 3),
            "exhausted": self.exhausted,
            "reasons": self.guard_reasons,
            "prompt": self.prompt,
            "task": self.task,
            "replay": self.replay,
            "items": self.items,
        }


def _time(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _message(message: Any) -> dict[str, Any]:
    if isinstance(message, ToolMessage):
        r = message.result
        return {"role": "tool", "text": clip(r.content), "name": r.name or "", "status": r.status}
    if isinstance(message, AssistantMessage):
        calls = [{"name": c.name, "args": c.arguments} for c in message.tool_calls]
        return {"role": "assistant", "text": clip(message.content), "calls": calls}
    if isinstance(message, UserMessage | SystemMessage):
        return {"role": message.role, "text": clip(message.content)}
    return {"role": "?", "text": ""}  # pragma: no cover - every message type is above


def _last_user(event: RequestEvent) -> str:
    """The request's last user message (what the run answers), clipped for the table."""
    texts = [m.content for m in event.messages if isinstance(m, UserMessage) and m.correction is None]
    return clip(texts[-1], 200) if texts else ""


def view_run(events: Sequence[tuple[int, TranscriptEvent]], file: str) -> RunView:
    """The view of one run: ``events`` are its ``(position in the file, event)`` pairs."""
    run_id = events[0][1].run if events else ""
    view = RunView(id=run_id, file=file)
    items = view.items
    times = [t for _, e in events if (t := _time(e.t)) is not None]
    start = times[0] if times else 0.0
    view.seconds = (times[-1] - start) if times else 0.0
    pending: dict[str, Any] | None = None  # the model call waiting for its output
    errored = ended = cancelled = False
    for index, event in events:
        at = round((_time(event.t) or start) - start, 3)
        match event:
            case RunStartEvent(config=config):
                view.producer = config.producer
                if isinstance(config, BatchRunConfig):
                    view.task = config.task or ""
            case RequestEvent():
                view.prompt = _last_user(event)
                items.append({
                    "k": "request", "i": index, "at": at,
                    "messages": [_message(m) for m in event.messages],
                    "tools": [t.name for t in event.tools],
                    "choice": event.tool_choice,
                })
            case ContractEvent():
                if event.text is not None:
                    view.contracts.setdefault(event.hash, clip(event.text, CONTRACT_LIMIT))
                items.append({"k": "contract", "i": index, "at": at, "hash": event.hash})
            case ModelRequestEvent():
                if not event.extension and not event.candidate:
                    view.steps += 1
                pending = {"k": "model", "i": index, "at": at, "attempt": event.attempt,
                           "enforcement": event.enforcement, "candidate": event.candidate,
                           "extension": event.extension, "text": "", "done": False}
                items.append(pending)
            case ModelOutputEvent():
                if not event.extension:
                    view.model_calls += 1
                view.tokens_in += event.usage.prompt_tokens
                view.tokens_out += event.usage.completion_tokens
                if pending is None or pending["done"]:  # an output without its request (old transcripts)
                    pending = {"k": "model", "i": index, "at": at, "attempt": 0, "enforcement": "",
                               "candidate": event.candidate, "extension": event.extension}
                    items.append(pending)
                pending.update({"text": clip(event.text), "tin": event.usage.prompt_tokens,
                                "tout": event.usage.completion_tokens, "finish": event.finish_reason,
                                "done": True, "o": index})
            case ParseEvent():
                items.append({
                    "k": "parse", "i": index, "at": at,
                    "calls": [{"name": c.name, "args": c.arguments} for c in event.tool_calls],
                    "problems": [p.code for p in event.problems],
                    "truncated": event.truncated,
                })
            case GuardEvent():
                if event.verdict != "accept" and event.reason not in view.guard_reasons:
                    view.guard_reasons.append(event.reason)
                items.append({"k": "guard", "i": index, "at": at, "guard": event.guard,
                              "verdict": event.verdict, "reason": event.reason, "detail": clip(event.detail, 500)})
            case RetryEvent():
                view.corrections += 1
                items.append({"k": "retry", "i": index, "at": at, "reason": event.reason,
                              "attempt": event.attempt, "message": clip(event.message)})
            case TransitionEvent():
                edge = (event.from_, event.to, event.event)
                if edge not in view.edges:
                    view.edges.append(edge)
                items.append({"k": "transition", "i": index, "at": at, "from": event.from_,
                              "event": event.event, "to": event.to})
            case ToolCallEvent(call=call):
                items.append({"k": "tool_call", "i": index, "at": at, "id": call.id,
                              "name": call.name, "args": call.arguments})
            case ToolResultEvent(result=result):
                items.append({"k": "tool_result", "i": index, "at": at, "id": result.call_id,
                              "name": result.name or "", "status": result.status, "text": clip(result.content)})
            case FinalEvent():
                view.exhausted = view.exhausted or event.exhausted
                items.append({"k": "final", "i": index, "at": at, "text": clip(event.content),
                              "exhausted": event.exhausted})
            case ErrorEvent():
                errored = True
                view.error = clip(f"{event.error}: {event.message}", 300)
                view.reason = event.error
                items.append({"k": "error", "i": index, "at": at, "error": event.error, "message": clip(event.message)})
            case RunEndEvent():
                ended = True
                errored = errored or event.status == "error"
                cancelled = event.status == "cancelled"
                view.steps = max(view.steps, event.steps)
                items.append({"k": "end", "i": index, "at": at, "status": event.status,
                              "steps": event.steps, "corrections": event.corrections})
    for item in items:
        item.pop("done", None)
    if errored:
        view.outcome = "failed"
        view.reason = view.reason or "error"
    elif not ended or cancelled:
        view.outcome, view.reason = "incomplete", "cancelled" if cancelled else "incomplete"
    elif view.exhausted:
        view.outcome, view.reason = "exhausted", "exhausted"
    else:
        view.outcome = "ok"
    return view
