"""The ``smiley`` dialect: ``{"name", "arguments"}`` JSON between two runs of 14 😊.

The delimiter is exactly fourteen U+1F60A; a shorter or longer run is ordinary text.
Prose may surround the calls, and a reply may hold many.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm._types import DialectName, ToolChoice
from agentfsm.dialects._render import ParsesReplies, dumps, example_call
from agentfsm.messages import ToolCall, ToolSpec

__all__ = ["SMILEY", "SMILEY_DELIMITER", "SMILEY_RUN", "SmileyDialect"]

#: U+1F60A SMILING FACE WITH SMILING EYES
SMILEY = "\U0001f60a"
#: how many smileys make a delimiter, exactly
SMILEY_RUN = 14
SMILEY_DELIMITER = SMILEY * SMILEY_RUN


class SmileyDialect(ParsesReplies):
    """Calls written between two delimiter lines of fourteen smileys."""

    name: DialectName = "smiley"

    @property
    def opener(self) -> str:
        """The opening delimiter line."""
        return SMILEY_DELIMITER + "\n"

    def render_call(self, call: ToolCall) -> str:
        """One delimited call."""
        body = dumps({"name": call.name, "arguments": call.arguments})
        return f"{SMILEY_DELIMITER}\n{body}\n{SMILEY_DELIMITER}"

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """Delimited calls, separated by a blank line."""
        return "\n\n".join(self.render_call(c) for c in calls)

    def render_final(self, content: str) -> str:
        """A final answer is plain prose."""
        return content

    def render_instructions(
        self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool
    ) -> str:
        """How to write a delimited call, with one example."""
        lines = [
            f"To call a tool, write a line of exactly {SMILEY_RUN} {SMILEY}, the call as JSON, "
            f"and another line of exactly {SMILEY_RUN} {SMILEY}, like this:",
            self.render_call(example_call(tools)),
            "You may write text before and after." if parallel else "Call one tool per reply.",
            "To answer without a tool, write plain text.",
        ]
        return "\n".join(lines)
