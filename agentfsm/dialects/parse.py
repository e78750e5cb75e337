"""``parse_reply``: the tolerant, linear-time parser of a model's text reply.

Every action format is recognised whatever dialect the contract asked for (fenced
``json action`` / ``json`` blocks, ``@tool`` lines, smiley delimiters, json-protocol
objects, Hermes ``<tool_call>``, XML ``<function=NAME>``, Mistral ``[TOOL_CALLS]``, Llama
bare JSON, pythonic lists; the formats are listed in ``_registry``); the dialect only selects strictness rules. The content is the prose with every
action block removed, then stripped of surrounding whitespace (``None`` when empty); a
json-protocol thought or final answer takes its block's place in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

from agentfsm.core._memo import JSON_OBJECT_FACTOR, Memo, tools_key
from agentfsm.core._types import DialectName
from agentfsm.dialects import get_dialect
from agentfsm.dialects._scan import Scanner
from agentfsm.core.parsed import ParsedReply
from agentfsm.core.messages import ToolCall, ToolDefinition, ToolSpec

__all__ = ["parse_reply", "scan_data"]


def scanner_for(
    tools: Sequence[ToolDefinition] | None,
    dialect: DialectName | None,
    strict: bool,
    stream: bool = False,
    data: bool = False,
) -> Scanner:
    """A fresh scanner configured for ``tools``, ``dialect`` and ``strict`` (``data``: a
    scan of data for every action in it, :class:`~agentfsm.dialects._scan.DataScan`)."""
    protocol = dialect is not None and get_dialect(dialect).name == "json-protocol"
    if tools is None:
        return Scanner(None, protocol, strict, stream, data=data)
    if _all_specs(tools):
        # read once per tool set's content: the proxy builds new specs for every request
        key = tools_key(tools)
        # the schemas are the specs' own: kept, they keep about their content's size alive
        known, schemas = _KNOWN.get(key, lambda: _known(tools), lambda _: key.size * JSON_OBJECT_FACTOR)
    else:
        known, schemas = _known(tools)
    return Scanner(known, protocol, strict, stream, schemas, data=data)


def _all_specs(tools: Sequence[ToolDefinition]) -> TypeGuard[Sequence[ToolSpec]]:
    return all(type(t) is ToolSpec for t in tools)


def _known(tools: Sequence[ToolDefinition]) -> tuple[frozenset[str], dict[str, Any]]:
    """The tools' names, and each one's parameter schema (shared: not to be changed)."""
    schemas = {t.name: t.parameters for t in map(ToolSpec.from_any, tools)}
    return frozenset(schemas), schemas


_KNOWN: Memo[tuple[frozenset[str], dict[str, Any]]] = Memo(64, max_bytes=8 << 20)


def parse_reply(
    text: str,
    tools: Sequence[ToolDefinition] | None = None,
    dialect: DialectName | None = None,
    *,
    strict: bool = False,
) -> ParsedReply:
    """Parse one model reply into prose, tool calls and problems.

    ``tools`` (ToolSpecs, or OpenAI / Anthropic tool dicts; anything else is a
    :class:`~agentfsm.core.errors.ToolSpecError`): when given, bare JSON and pythonic calls count only if they name one of
    them (fenced and delimited actions always count). ``dialect`` (default
    ``json-action``) selects the rules: with ``json-protocol``, a thought is cut to 200
    characters and ``strict`` rejects any text outside the one JSON object. Never
    raises on any input; an unknown dialect name is a
    :class:`~agentfsm.core.errors.UsageError`.
    """
    scanner = scanner_for(tools, dialect, strict)
    scanner.feed(text, final=True)
    return scanner.result()


def scan_data(
    text: str, tools: Sequence[ToolDefinition] | None = None, dialect: DialectName | None = None
) -> tuple[tuple[ToolCall, ...], int | None]:
    """Every call a model could copy out of ``text`` (data: a tool result, pasted text),
    and where the text stopped being read in full (None: it was), see
    :class:`~agentfsm.dialects._scan.DataScan`."""
    scanner = scanner_for(tools, dialect, False, data=True)
    assert scanner.data is not None
    scanner.data.budget += 4 * len(text)
    scanner.feed(text, final=True)
    return scanner.result().tool_calls, scanner.data.incomplete_from
