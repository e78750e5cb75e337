"""The ``smiley`` dialect: ``{"name", "arguments"}`` JSON between two runs of 14 😊.

The delimiter is exactly fourteen U+1F60A; a shorter or longer run is ordinary text.
Prose may surround the calls, and a reply may hold many.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from agentfsm.core._types import DialectName
from agentfsm.core.choice import ToolChoice
from agentfsm.dialects._format import Format, Opened, Prose, Scan
from agentfsm.dialects._readers import CloserReader, Verdict
from agentfsm.dialects._render import dumps, example_call
from agentfsm.dialects._tokens import OpenerDef, lit
from agentfsm.dialects.base import ProseAnswers
from agentfsm.core.messages import ToolCall, ToolSpec

if TYPE_CHECKING:
    from agentfsm.dialects._decode import Block

__all__ = ["FORMATS", "SMILEY", "SMILEY_DELIMITER", "SMILEY_RUN", "SmileyDialect", "SmileyFormat"]

#: U+1F60A SMILING FACE WITH SMILING EYES
SMILEY = "\U0001f60a"
#: how many smileys make a delimiter, exactly
SMILEY_RUN = 14
SMILEY_DELIMITER = SMILEY * SMILEY_RUN


class SmileyDialect(ProseAnswers):
    """Calls written between two delimiter lines of fourteen smileys."""

    name: DialectName = "smiley"
    action_name = "😊 action block"
    action_format = 'the JSON {"name": NAME, "arguments": {...}} between two runs of 14 😊'
    answer_format = "plain text"

    @property
    def opener(self) -> str:
        """The opening delimiter line."""
        return SMILEY_DELIMITER + "\n"

    def render_call(self, call: ToolCall) -> str:
        """One delimited call."""
        body = dumps({"name": call.name, "arguments": call.arguments})
        return f"{SMILEY_DELIMITER}\n{body}\n{SMILEY_DELIMITER}"

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


_RUN: Final = re.compile(SMILEY + "+")


def smiley_verdict(s: str, q: int, final: bool) -> Verdict:
    """A run of exactly 14 smileys closes; a longer run is skipped whole."""
    e = _RUN.match(s, q).end()  # type: ignore[union-attr]
    if (q > 0 and s[q - 1] == SMILEY) or e - q > SMILEY_RUN:
        return -1, e
    if e == len(s) and not final:
        return None, q
    return (e if e - q == SMILEY_RUN else -1), e


class SmileyFormat(Format):
    """Blocks between two runs of exactly 14 smileys (a longer or shorter run is text)."""

    sources = {"smiley": "smiley"}
    openers = (OpenerDef("smiley", (lit(SMILEY_DELIMITER),)),)
    cut = {"smiley": "a smiley delimiter without its closing delimiter"}
    closer = SMILEY_DELIMITER
    custom_search = True

    def search(self, scan: Scan, buf: str, i: int, final: bool) -> tuple[int, int, str] | None:
        """The next run of exactly 14 (known only once a character follows it, or at the end)."""
        j = i
        while True:
            q = buf.find(SMILEY_DELIMITER, j)
            if q < 0:
                return None
            e = _RUN.match(buf, q).end()  # type: ignore[union-attr]
            if e - q == SMILEY_RUN and scan.before(buf, q) != SMILEY and (final or e < len(buf)):
                return (q, e, "smiley")
            j = e

    def holds(self, scan: Scan, buf: str, i: int, opener: OpenerDef) -> bool:
        """A run of at most 14 at the end could still be (or stop being) a delimiter."""
        n = len(buf)
        return scan.before(buf, i) != SMILEY and n - i <= SMILEY_RUN and buf.count(SMILEY, i) == n - i

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """The body runs to the next delimiter outside a JSON string."""
        return Opened("smiley", end, CloserReader(buf, p, SMILEY_DELIMITER, smiley_verdict))

    def body_end(self, block: Block) -> int | None:
        """Before the closing delimiter."""
        return len(block.raw) - SMILEY_RUN


FORMATS: Final = (SmileyFormat(),)
