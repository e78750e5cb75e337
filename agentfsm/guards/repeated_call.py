"""Repeated calls: a call that repeats the last round exactly is sent back, once per round.

Weak models often re-issue the call whose result they just got. They are told once per
round, with the result quoted (under constrained decoding the retry's grammar also
leaves the tools already called out, see :func:`agentfsm.core.engine.plan`); if they
insist, the call runs, and :mod:`~agentfsm.guards.loops` stops the turn after
``loop_threshold`` identical rounds.

Under a required call (``required`` or a named tool) the correction never asks for an
answer, which the turn does not allow: it asks for a call with other arguments.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core._types import ToolChoice
from agentfsm.core.messages import Message, ToolCall, ToolMessage, UserMessage
from agentfsm.guards import loops
from agentfsm.guards.base import ACCEPT, Correction, Verdict

__all__ = ["GUARD", "REASON", "check", "corrected_this_round"]

GUARD = "repeated_call"
#: the correction reason, as written on the correction message of the history
REASON = "repeated_call"
_SHOWN = 300


def corrected_this_round(history: Sequence[Message]) -> bool:
    """Whether a repeated-call correction was already sent since the last result or user turn."""
    for msg in reversed(history):
        if isinstance(msg, ToolMessage):
            return False
        if isinstance(msg, UserMessage):
            if msg.correction == REASON:
                return True
            if msg.correction is None:
                return False
    return False


def _last_result(history: Sequence[Message]) -> str | None:
    for msg in reversed(history):
        if isinstance(msg, ToolMessage):
            return msg.result.content
    return None


def check(history: Sequence[Message], calls: Sequence[ToolCall], tool_choice: ToolChoice) -> Verdict:
    """Correct the first of ``calls`` that repeats the last round exactly (same call, and
    it got one result), unless this round was told so already."""
    if corrected_this_round(history):
        return ACCEPT
    for index, call in enumerate(calls):
        if loops.repeats(history, call) != 1:
            continue
        result = _last_result(history)
        if result is None:
            return ACCEPT
        then = (
            "Call the tool again only with different arguments."
            if tool_choice not in ("auto", "none")
            else "Answer the user now, or call a different tool."
        )
        return Correction(
            guard=GUARD,
            reason=REASON,
            message=(
                f"You already called {call.name} with these arguments and the result was: "
                f"{result[:_SHOWN]}\nUse that result. {then}"
            ),
            detail=f"{call.name} repeated with the same arguments",
            call_index=index,
        )
    return ACCEPT
