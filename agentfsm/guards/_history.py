"""Reading a history the way the guards and policies do: the current user turn, what it
was told, the calls it made and the results they got."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    round_start,
)

__all__ = [
    "argument_strings",
    "called",
    "conversation_text",
    "calls_and_results",
    "latest_request",
    "results",
    "results_so_far",
    "show_arguments",
    "subjects",
    "told",
    "turn",
]

#: how much of a result, or of a call's arguments, a correction quotes
_SHOWN = 120


def latest_request(history: Sequence[Message]) -> str:
    """The user's latest request (not a correction), whole; ``""`` when there is none."""
    return next((m.content for m in reversed(history) if isinstance(m, UserMessage) and m.correction is None), "")


def turn(history: Sequence[Message]) -> list[Message]:
    """The messages after the latest user request (corrections are not requests)."""
    for index in range(len(history) - 1, -1, -1):
        msg = history[index]
        if isinstance(msg, UserMessage) and msg.correction is None:
            return list(history[index + 1:])
    return list(history)


def told(history: Sequence[Message], reason: str, *, this_round: bool = False) -> bool:
    """Whether a correction for ``reason`` was sent in the current user turn, or with
    ``this_round`` in the current round (:func:`~agentfsm.core.messages.round_start`)."""
    recent = history[round_start(history):] if this_round else turn(history)
    return any(isinstance(m, UserMessage) and m.correction == reason for m in recent)


def called(history: Sequence[Message]) -> set[str]:
    """The names of the tools called in the current user turn."""
    return {c.name for m in turn(history) if isinstance(m, AssistantMessage) for c in m.tool_calls}


def results(history: Sequence[Message]) -> list[str]:
    """The tool results of the current user turn, oldest first."""
    return [m.result.content for m in turn(history) if isinstance(m, ToolMessage)]


def results_so_far(history: Sequence[Message]) -> list[str]:
    """The results that came back since the latest user turn, one sentence each, oldest
    first: "The result of NAME is CONTENT." (``NAME(args)`` when the same tool was
    called twice)."""
    return calls_and_results(history)[1]


def calls_and_results(history: Sequence[Message]) -> tuple[list[ToolCall], list[str]]:
    """The calls made since the latest user turn, and :func:`results_so_far`."""
    calls: list[ToolCall] = []
    found: list[tuple[str, str]] = []
    for msg in reversed(history):
        if isinstance(msg, UserMessage) and msg.correction is None:
            break
        if isinstance(msg, ToolMessage):
            found.append((msg.result.call_id, msg.result.content))
        elif isinstance(msg, AssistantMessage):
            calls.extend(msg.tool_calls)
    by_id = {c.id: c for c in calls}
    found.reverse()
    heads = subjects([(c.name if (c := by_id.get(i)) else None, c) for i, _ in found])
    lines = []
    for (call_id, content), head in zip(found, heads, strict=True):
        text = " ".join(content.split())
        head = head or call_id
        lines.append(f"The result of {head} is {text[:_SHOWN] + '...' if len(text) > _SHOWN else text}.")
    return calls, lines


def subjects(named: Sequence[tuple[str | None, ToolCall | None]]) -> list[str | None]:
    """What each result (its tool's name, and its call where known) is called: the tool's
    name, or ``NAME(ARGS)`` where several of them share that name and the call is known
    (the same tool twice: say which call)."""
    names = [name for name, _ in named]
    return [
        f"{name}({show_arguments(call)})" if name is not None and call is not None and names.count(name) > 1 else name
        for name, call in named
    ]


def show_arguments(call: ToolCall) -> str:
    """A call's arguments as a correction quotes them (``a=1, b='x'``, cut when long)."""
    text = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def argument_strings(value: Any) -> list[str]:
    """Every string value inside a call's arguments (nested objects and lists too), as
    written; keys are not values."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in argument_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in argument_strings(v)]
    return []


def conversation_text(history: Sequence[Message]) -> str:
    """What the conversation said, lowercased: system prompts, user turns (not the
    runtime's corrections) and tool results; the model's own replies are left out."""
    parts: list[str] = []
    for msg in history:
        if isinstance(msg, ToolMessage):
            parts.append(msg.result.content)
        elif isinstance(msg, UserMessage):
            if msg.correction is None:
                parts.append(msg.content)
        elif isinstance(msg, SystemMessage):
            parts.append(msg.content)
    return "\n".join(parts).lower()
