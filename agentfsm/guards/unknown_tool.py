"""Unknown tool: a call to a name that was not offered is rejected with the offered names."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from agentfsm.core.parsed import ParsedReply
from agentfsm.guards.base import ACCEPT, Correction, Verdict
from agentfsm.core.messages import ToolSpec

__all__ = ["GUARD", "MAX_LISTED", "check"]

GUARD = "unknown_tool"
#: at most this many offered names are listed in the message
MAX_LISTED = 30
_MAX_NAME = 80


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    more = len(names) - MAX_LISTED
    return f"{shown} (and {more} more)" if more > 0 else shown


def check(parsed: ParsedReply, tools: Sequence[ToolSpec]) -> Verdict:
    """Reject the first call whose tool name is not among ``tools``."""
    names = [tool.name for tool in tools]
    offered = set(names)
    for index, call in enumerate(parsed.tool_calls):
        if call.name in offered:
            continue
        if not names:
            message = "No tools are available here. Answer in plain text without any action."
        else:
            shown = call.name if len(call.name) <= _MAX_NAME else call.name[:_MAX_NAME] + "..."
            message = f"There is no tool named {shown!r}. Available tools: {_listing(names)}."
            # difflib is quadratic: only suggest for names of a sensible length
            close = (
                difflib.get_close_matches(call.name, names, n=1, cutoff=0.6)
                if len(call.name) <= _MAX_NAME
                else []
            )
            if close:
                message += f" Did you mean {close[0]!r}?"
            message += " Call one of the available tools, using its exact name."
        return Correction(
            guard=GUARD,
            reason="unknown_tool",
            message=message,
            detail=f"call {index}: {call.name[:_MAX_NAME]!r} not in {len(names)} offered tools",
            call_index=index,
        )
    return ACCEPT
