"""Empty reply: a reply with no call and no text is asked again, never passed on as an answer.

A chat client that receives an empty assistant message cannot tell it from a lost
answer. A reply that holds nothing (no call, no prose, no readable action) is sent
back once per correction like any other bad reply; when the budget runs out, the
turn ends as the engine ends a spent budget (the model's earlier prose, or a typed
failure), never with the empty text.
"""

from __future__ import annotations

from typing import Final

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.parsed import ParsedReply
from agentfsm.guards.base import ACCEPT, Correction, Verdict, action_format, answer_format

__all__ = ["GUARD", "REASON", "check"]

GUARD = "empty"
REASON: Final = "empty_reply"


def check(parsed: ParsedReply, tool_choice: ToolChoice, dialect_name: DialectName) -> Verdict:
    """Correct a reply with neither a call, a problem to report, nor any text."""
    if parsed.tool_calls or parsed.rejected or (parsed.content or "").strip():
        return ACCEPT
    if tool_choice.mode == "none":
        ask = "Answer the user in plain prose."
    else:
        ask = f"Answer the user, written as {answer_format(dialect_name)}, or call a tool, written as {action_format(dialect_name)}."
    return Correction(guard=GUARD, reason=REASON, message=f"Your last reply was empty. {ask}", detail="no text and no call")
