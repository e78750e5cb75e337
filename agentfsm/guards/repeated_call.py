"""Repeated calls: a call that repeats the last round exactly is sent back, once per round.

Weak models often re-issue the call whose result they just got. They are told once per
round, with the result quoted (under constrained decoding the retry's grammar also
leaves the tools already called out, see :func:`agentfsm.engine.decide.plan`); if they
insist, the call runs, and :mod:`~agentfsm.guards.loops` stops the turn after
``loop_threshold`` identical rounds.

Under a required call (``required`` or a named tool) the correction never asks for an
answer, which the turn does not allow: it asks for a call with other arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agentfsm.core.choice import ToolChoice
from agentfsm.core.messages import AssistantMessage, Message, ToolCall, ToolMessage
from agentfsm.guards import loops
from agentfsm.guards._history import results_so_far, told
from agentfsm.guards.base import ACCEPT, Correction, Verdict

__all__ = ["GUARD", "REASON", "check", "corrected_this_round"]

GUARD = "repeated_call"
#: the correction reason, as written on the correction message of the history
REASON: Final = "repeated_call"
_SHOWN = 300


def corrected_this_round(history: Sequence[Message]) -> bool:
    """Whether a repeated-call correction was already sent since the last result or user turn."""
    return told(history, REASON, this_round=True)


def _result_of(history: Sequence[Message], call: ToolCall) -> str | None:
    """The result of the latest earlier call with ``call``'s name and arguments."""
    wanted = loops.call_signature(call)
    ids = {
        c.id
        for m in history
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if loops.call_signature(c) == wanted
    }
    for msg in reversed(history):
        if isinstance(msg, ToolMessage) and msg.result.call_id in ids:
            return msg.result.content
    return None


def check(history: Sequence[Message], calls: Sequence[ToolCall], tool_choice: ToolChoice) -> Verdict:
    """Correct the first of ``calls`` that repeats the last round exactly (same call, and
    it got one result), unless this round was told so already.

    The correction quotes that call's own result, and the turn's other results when
    there are several (a model that repeats the first of two calls restates only the
    result it was shown).
    """
    if corrected_this_round(history):
        return ACCEPT
    for index, call in enumerate(calls):
        if loops.repeats(history, call) != 1:
            continue
        result = _result_of(history, call)
        if result is None:
            return ACCEPT
        then = (
            "Call the tool again only with different arguments."
            if tool_choice.requires_call
            else "Answer the user now, or call a different tool."
        )
        others = results_so_far(history)
        shown = "\n".join(others) + "\nUse these results." if len(others) > 1 else "Use that result."
        return Correction(
            guard=GUARD,
            reason=REASON,
            message=(
                f"You already called {call.name} with these arguments and the result was: "
                f"{result[:_SHOWN]}\n{shown} {then}"
            ),
            detail=f"{call.name} repeated with the same arguments",
            call_index=index,
        )
    return ACCEPT
