"""tool_choice: a forced call that is missing, a named tool that was not the one called.

- ``required`` (Anthropic ``any``) and no call: ``missing_call``.
- a tool name and no call: ``missing_call``; a call to another tool: ``wrong_tool``.
- ``none`` and a call, or an action that could not be read: ``calls_not_allowed``
  (the retry asks for prose).
- ``auto``: anything goes (the refusal guard judges prose that should have been a call).

Having tool history never makes a call mandatory here: only ``tool_choice`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.core.parsed import ParsedReply
from agentfsm.guards.base import (
    ACCEPT,
    Correction,
    Verdict,
    action_format,
    action_name,
    with_example,
)
from agentfsm.core.messages import ToolSpec

__all__ = ["GUARD", "check"]

GUARD = "tool_choice"
#: parser problems that mean the reply held an action (one that could not be read)
_ACTION_PROBLEMS = frozenset({"invalid_json", "truncated", "malformed_action"})


def check(
    parsed: ParsedReply,
    tool_choice: ToolChoice,
    tools: Sequence[ToolSpec],
    *,
    dialect_name: DialectName = DEFAULTS.dialect,
    example: str = "",
) -> Verdict:
    """Correct a reply that breaks ``tool_choice``."""
    calls = parsed.tool_calls
    if tool_choice.mode == "auto":
        return ACCEPT
    if tool_choice.mode == "none":
        # an action that could not be read is still an action: under none it is not
        # resent as valid JSON, the model is asked for prose
        unreadable = [p for p in parsed.rejected if p.code in _ACTION_PROBLEMS]
        if not calls and not unreadable:
            return ACCEPT
        return Correction(
            guard=GUARD,
            reason="calls_not_allowed",
            message="Do not call any tool now. Answer the user in plain prose, with no action.",
            detail=f"{len(calls)} call(s), {len(unreadable)} unreadable action(s) under tool_choice=none",
            call_index=0 if calls else None,
        )
    named = tool_choice.name
    if named is None and not tools:
        return ACCEPT  # required, but nothing to call: nothing can satisfy it
    if not calls:
        missing = f"Your last response did not include any {action_name(dialect_name)}."
        if named is None:
            listed = ", ".join(tool.name for tool in tools[:30])
            ask = f"You must call one of these tools now: {listed}."
        else:
            ask = f"You must call {named} now."
        return Correction(
            guard=GUARD,
            reason="missing_call",
            message=with_example(f"{missing} {ask} Write {action_format(dialect_name)}.", example),
            detail=f"no call under tool_choice={tool_choice}",
        )
    if named is not None:
        for index, call in enumerate(calls):
            if call.name != named:
                return Correction(
                    guard=GUARD,
                    reason="wrong_tool",
                    message=with_example(
                        f"You must call {named}, not {call.name[:80]}. Call {named} now.", example
                    ),
                    detail=f"call {index} is {call.name[:80]!r}, tool_choice={named!r}",
                    call_index=index,
                )
    return ACCEPT
