"""Reading a history the way the guards do: the current user turn, what it was told."""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core.messages import Message, ToolMessage, UserMessage

__all__ = ["told", "turn"]


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
