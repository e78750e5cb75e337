"""tool_choice: a forced call that is missing, a named tool that was not the one called.

- ``required`` (Anthropic ``any``) and no call: ``missing_call``.
- a tool name and no call: ``missing_call``; a call to another tool: ``wrong_tool``.
- ``none`` and a call: ``calls_not_allowed``.
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
    answer_format,
    with_example,
)
from agentfsm.core.messages import ToolSpec

__all__ = ["GUARD", "check"]

GUARD = "tool_choice"


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
        if not calls:
            return ACCEPT
        return Correction(
            guard=GUARD,
            reason="calls_not_allowed",
            message=f"Do not call any tool now. Answer the user in {answer_format(dialect_name)}.",
            detail=f"{len(calls)} call(s) under tool_choice=none",
            call_index=0,
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
