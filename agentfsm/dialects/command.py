"""The ``command`` dialect: one line ``@tool NAME {json-args}`` per call."""

from __future__ import annotations

import re
from collections.abc import Sequence

from agentfsm._types import DialectName, ToolChoice
from agentfsm.dialects._render import ParsesReplies, dumps, example_call
from agentfsm.dialects._tokens import OpenerDef, cls, lit
from agentfsm.messages import ToolCall, ToolSpec

__all__ = ["COMMAND", "COMMAND_AT_END", "COMMAND_HEAD", "COMMAND_PREFIX", "CommandDialect"]

#: the word a command line starts with
COMMAND_PREFIX = "@tool"
_NAME = (cls("[A-Za-z_]"), cls(r"[\w.\-]", 0, 127))
#: ``@tool NAME`` then ``{`` or a line end (not after a word character or ``@``: the
#: scanner checks that); a command ending the reply is found by :data:`COMMAND_AT_END`
COMMAND = OpenerDef(
    "command",
    (lit(COMMAND_PREFIX), cls(r"[ \t]", 1, 16), *_NAME, cls(r"[ \t]", 0, 16), lit("{", "\n", "\r")),
)
#: a command without arguments as the last thing in the reply
COMMAND_AT_END = re.compile(r"@tool[ \t]{1,16}[A-Za-z_][\w.\-]{0,127}[ \t]{0,16}\Z")
#: the tool name and the blanks after it
COMMAND_HEAD = re.compile(r"@tool[ \t]{1,16}([A-Za-z_][\w.\-]{0,127})[ \t]{0,16}")


class CommandDialect(ParsesReplies):
    """Actions as single command lines: ``@tool get_weather {"city": "Paris"}``."""

    name: DialectName = "command"

    @property
    def opener(self) -> str:
        """The start of a command line."""
        return f"{COMMAND_PREFIX} "

    def render_call(self, call: ToolCall) -> str:
        """One command line; the arguments are one JSON object on the same line."""
        return f"{COMMAND_PREFIX} {call.name} {dumps(call.arguments)}"

    def render_calls(self, calls: Sequence[ToolCall]) -> str:
        """One line per call."""
        return "\n".join(self.render_call(c) for c in calls)

    def render_final(self, content: str) -> str:
        """A final answer is plain prose."""
        return content

    def render_instructions(
        self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool
    ) -> str:
        """How to write a command line, with one example."""
        lines = [
            "To call a tool, write one line exactly like this:",
            self.render_call(example_call(tools)),
            f"Start the line with {COMMAND_PREFIX}, then the tool name, then the arguments "
            "as one JSON object on the same line.",
            "Write one line per call." if parallel else "Write only one such line.",
            "To answer without a tool, write plain text.",
        ]
        return "\n".join(lines)
