"""``parse_reply``: the tolerant, linear-time parser of a model's text reply.

Every action format is recognised whatever dialect the contract asked for (fenced
``json action`` / ``json`` blocks, ``@tool`` lines, smiley delimiters, json-protocol
objects, Hermes ``<tool_call>``, Mistral ``[TOOL_CALLS]``, Llama bare JSON, pythonic
lists); the dialect only selects strictness rules. The content is the prose with every
action block removed, then stripped of surrounding whitespace (``None`` when empty); a
json-protocol thought or final answer takes its block's place in it.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm._types import DialectName
from agentfsm.dialects import get_dialect
from agentfsm.dialects._scan import Scanner
from agentfsm.dialects.base import ParsedReply
from agentfsm.messages import ToolSpec

__all__ = ["parse_reply"]


def scanner_for(
    tools: Sequence[ToolSpec] | None,
    dialect: DialectName | str | None,
    strict: bool,
    stream: bool = False,
) -> Scanner:
    """A fresh scanner configured for ``tools``, ``dialect`` and ``strict``."""
    protocol = dialect is not None and get_dialect(dialect).name == "json-protocol"
    known = None if tools is None else frozenset(t.name for t in tools)
    return Scanner(known, protocol, strict, stream)


def parse_reply(
    text: str,
    tools: Sequence[ToolSpec] | None = None,
    dialect: DialectName | str | None = None,
    *,
    strict: bool = False,
) -> ParsedReply:
    """Parse one model reply into prose, tool calls and problems.

    ``tools``: when given, bare JSON and pythonic calls count only if they name one of
    them (fenced and delimited actions always count). ``dialect`` (default
    ``json-action``) selects the rules: with ``json-protocol``, a thought is cut to 200
    characters and ``strict`` rejects any text outside the one JSON object. Never
    raises on any input; an unknown dialect name is a
    :class:`~agentfsm.errors.UsageError`.
    """
    scanner = scanner_for(tools, dialect, strict)
    scanner.feed(text, final=True)
    return scanner.result()
