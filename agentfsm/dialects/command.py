"""The ``command`` dialect: one line ``@tool NAME {json-args}`` per call."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.dialects._format import Format, Opened, Prose, Scan
from agentfsm.dialects._readers import MAX_BLOCK_CHARS, BracketReader
from agentfsm.dialects._render import dumps, example_call
from agentfsm.dialects._tokens import OpenerDef, cls, lit
from agentfsm.dialects.base import ProseAnswers
from agentfsm.core.messages import ToolCall, ToolSpec

__all__ = [
    "COMMAND",
    "COMMAND_AT_END",
    "COMMAND_HEAD",
    "COMMAND_PREFIX",
    "FORMATS",
    "CommandDialect",
    "CommandFormat",
]

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


class CommandDialect(ProseAnswers):
    """Actions as single command lines: ``@tool get_weather {"city": "Paris"}``."""

    name: DialectName = "command"
    action_name = "@tool line"
    action_format = "one line: @tool NAME {json arguments}"
    answer_format = "plain text"
    #: one command line per call
    call_separator = "\n"

    @property
    def opener(self) -> str:
        """The start of a command line."""
        return f"{COMMAND_PREFIX} "

    def render_call(self, call: ToolCall) -> str:
        """One command line; the arguments are one JSON object on the same line."""
        return f"{COMMAND_PREFIX} {call.name} {dumps(call.arguments)}"

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


#: a command without arguments ending the reply starts within this many characters of the end
COMMAND_TAIL: Final = 170


#: a command written right after one of these is quoted, not written: inline code
#: (`` `@tool f {}` ``) or a quotation (``"@tool f {}"``) in prose
_QUOTED_BY = "_@`\"'\u2018\u201c\u00ab\u2039"


def _word_boundary(scan: Scan, buf: str, i: int) -> bool:
    c = scan.before(buf, i)
    return not c or not (c.isalnum() or c in _QUOTED_BY)


class CommandFormat(Format):
    """``@tool NAME {json}`` lines (not after a word character or ``@``: ``me@tool x``;
    nor after a backtick or an opening quote: quoted in prose, not written)."""

    sources = {"command": "command"}
    openers = (COMMAND,)
    cut = {"command": "an @tool line cut off before the end of its JSON arguments"}
    custom_search = True

    def search(self, scan: Scan, buf: str, i: int, final: bool) -> tuple[int, int, str] | None:
        """The next command at a word boundary; at the end of the reply, one without arguments."""
        best = self._search(scan, COMMAND.regex, buf, i)
        if final and best is None:
            best = self._search(scan, COMMAND_AT_END, buf, max(i, len(buf) - COMMAND_TAIL))
        return best

    @staticmethod
    def _search(scan: Scan, regex: re.Pattern[str], buf: str, j: int) -> tuple[int, int, str] | None:
        while (m := regex.search(buf, j)) is not None:
            if _word_boundary(scan, buf, m.start()):
                return (m.start(), m.end(), "command")
            j = m.start() + 1
        return None

    def holds(self, scan: Scan, buf: str, i: int, opener: OpenerDef) -> bool:
        """Only at a word boundary."""
        return super().holds(scan, buf, i, opener) and _word_boundary(scan, buf, i)

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """Arguments in braces are read as JSON; a name ending its line is a call without them."""
        m = COMMAND_HEAD.match(buf, p)
        assert m is not None  # the opener matched the same text
        name, e = m.group(1), m.end()
        if e < len(buf) and buf[e] == "{":
            return Opened("command", e, BracketReader(buf, p, e, python=False, cap=MAX_BLOCK_CHARS), name=name)
        # the reply ending right after the name was cut before its arguments
        state = "truncated" if e == len(buf) and final else "closed"
        return Opened("command", e, None, end=e, name=name, state=state)


FORMATS: Final = (CommandFormat(),)
