"""Loops: the same call, with the same arguments, after the same result, N times -> stop.

Counted from the history of the current turn (since the last real user message):
a call is repeating when each of the last ``threshold`` tool-calling rounds made it
(same name, same canonical JSON arguments) and each got the same result (status and
content). A call that got a different result, or a round without it, breaks the run.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from agentfsm.core.config import DEFAULTS
from agentfsm.guards.base import ACCEPT, Stop, Verdict
from agentfsm.core.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)

__all__ = ["DEFAULT_THRESHOLD", "GUARD", "call_signature", "check", "repeats", "rounds"]

GUARD = "loops"
_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
#: earlier identical rounds, each with the same result, after which a new identical call stops
DEFAULT_THRESHOLD = DEFAULTS.loop_threshold

_Round = tuple[tuple[ToolCall, ...], dict[str, ToolResult]]


def call_signature(call: ToolCall) -> str:
    """The call's tool name and its arguments as canonical JSON (sorted keys, no spaces)."""
    args = orjson.dumps(call.arguments, option=_CANONICAL, default=str).decode()
    return f"{call.name}{args}"


def rounds(history: Sequence[Message]) -> list[_Round]:
    """The tool-calling rounds of the current turn, oldest first, each with its results."""
    rounds: list[_Round] = []
    for message in history:
        if isinstance(message, UserMessage) and message.correction is None:
            rounds = []
        elif isinstance(message, AssistantMessage) and message.tool_calls:
            rounds.append((message.tool_calls, {}))
        elif isinstance(message, ToolMessage) and rounds:
            rounds[-1][1][message.call_id] = message.result
    return rounds


def repeats(history: Sequence[Message], call: ToolCall) -> int:
    """How many of the latest rounds in a row made ``call`` and got one same result."""
    wanted = call_signature(call)
    outcome: tuple[str, str] | None = None
    count = 0
    for calls, results in reversed(rounds(history)):
        same = next((c for c in calls if call_signature(c) == wanted), None)
        result = results.get(same.id) if same is not None else None
        if result is None:
            break
        key = (result.status, result.content)
        if outcome is not None and key != outcome:
            break
        outcome = key
        count += 1
    return count


def check(
    history: Sequence[Message], calls: Sequence[ToolCall], threshold: int = DEFAULT_THRESHOLD
) -> Verdict:
    """Stop when a new call was already made ``threshold`` times in a row with the same result."""
    for call in calls:
        count = repeats(history, call)
        if count >= threshold:
            return Stop(
                guard=GUARD,
                reason="loop",
                detail=(
                    f"{call.name} was called {count} times in a row with the same arguments "
                    "and got the same result each time; stopping instead of calling it again"
                ),
                tool=call.name,
                repeats=count,
            )
    return ACCEPT
