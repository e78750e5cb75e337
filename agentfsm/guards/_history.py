"""Reading a history the way the guards do: the current user turn, what it was told."""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core.messages import AssistantMessage, Message, ToolMessage, UserMessage

__all__ = ["called", "results", "told", "turn"]


def turn(history: Sequence[Message]) -> list[Message]:
    """The messages after the latest user request (corrections are not requests)."""
    for index in range(len(history) - 1, -1, -1):
        msg = history[index]
        if isinstance(msg, UserMessage) and msg.correction is None:
            return list(history[index + 1:])
    return list(history)


def told(history: Sequence[Message], reason: str, *, this_round: bool = False) -> bool:
    """Whether a correction for ``reason`` was sent in the current user turn, or with
    ``this_round`` since its latest tool result."""
    for msg in reversed(history):
        if this_round and isinstance(msg, ToolMessage):
            return False
        if isinstance(msg, UserMessage):
            if msg.correction is None:
                return False
            if msg.correction == reason:
                return True
    return False


def called(history: Sequence[Message]) -> set[str]:
    """The names of the tools called in the current user turn."""
    return {c.name for m in turn(history) if isinstance(m, AssistantMessage) for c in m.tool_calls}


def results(history: Sequence[Message]) -> list[str]:
    """The tool results of the current user turn, oldest first."""
    return [m.result.content for m in turn(history) if isinstance(m, ToolMessage)]
