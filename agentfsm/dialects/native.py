"""Formats models emit on their own, recognised whatever dialect was asked for.

- Hermes / Qwen: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
- Mistral: ``[TOOL_CALLS]name[ARGS]{...}``, and ``[TOOL_CALLS][{"name", "arguments"}, ...]``
- Llama 3: a bare ``{"name": ..., "parameters": {...}}`` object (or an array of them)
- pythonic: ``[get_weather(city="Paris"), get_time(tz="UTC")]``

The bare and pythonic forms count as calls only when they have the shape of one and,
when the tools are known, only when they name a known tool.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Final

from agentfsm.dialects._decode import Block, Context, Outcome, decode_json, settled, too_deep
from agentfsm.dialects._format import Format, Opened, Prose, Scan
from agentfsm.dialects._readers import (
    MAX_BLOCK_CHARS,
    MAX_PYTHONIC_CHARS,
    BracketReader,
    CloserReader,
    fixed_verdict,
)
from agentfsm.dialects._tokens import OpenerDef, cls, lit

__all__ = [
    "BARE_ARRAY",
    "BARE_OBJECT",
    "FORMATS",
    "HERMES",
    "HERMES_CLOSER",
    "MISTRAL",
    "MISTRAL_HEAD",
    "PYTHONIC",
    "BareFormat",
    "HermesFormat",
    "MistralFormat",
    "parse_pythonic",
]

_QUOTE = cls("[\"'\u201c\u201d\u2018\u2019]")
_CALL_KEYS = ("name", "tool", "function")

HERMES: Final = OpenerDef("hermes", (lit("<tool_call>"),))
HERMES_CLOSER: Final = "</tool_call>"
_MISTRAL_WS = cls(r"[ \t\r\n]", 0, 8)
_MISTRAL_NAME = (cls("[A-Za-z_]"), cls(r"[\w.\-]", 0, 127))
#: ``[TOOL_CALLS]`` followed by a JSON list or object, ``name[ARGS]{`` or ``name[CALL_ID]id[ARGS]{``
MISTRAL: Final = (
    OpenerDef("mistral-json", (lit("[TOOL_CALLS]"), _MISTRAL_WS, lit("[", "{"))),
    OpenerDef(
        "mistral-named",
        (lit("[TOOL_CALLS]"), _MISTRAL_WS, *_MISTRAL_NAME, lit("[ARGS]"), _MISTRAL_WS, lit("{")),
    ),
    OpenerDef(
        "mistral-id",
        (
            lit("[TOOL_CALLS]"),
            _MISTRAL_WS,
            *_MISTRAL_NAME,
            lit("[CALL_ID]"),
            cls(r"[\w\-]", 0, 64),
            lit("[ARGS]"),
            _MISTRAL_WS,
            lit("{"),
        ),
    ),
)
#: parses what :data:`MISTRAL` matched: a JSON start (group 1) or a name (2) and its ``{`` (3)
MISTRAL_HEAD: Final = re.compile(
    r"\[TOOL_CALLS\][ \t\r\n]{0,8}(?:([\[{])|([A-Za-z_][\w.\-]{0,127})(?:\[CALL_ID\][\w\-]{0,64})?"
    r"\[ARGS\][ \t\r\n]{0,8}(\{))"
)
#: ``{"name":`` ... a JSON object whose first key is one a call (or json-protocol) starts with
BARE_OBJECT: Final = OpenerDef(
    "object",
    (
        lit("{"),
        cls(r"\s", 0, 32),
        _QUOTE,
        lit(*_CALL_KEYS, "thought", "action", "final", "tool_calls"),
        _QUOTE,
        cls(r"[ \t]", 0, 8),
        lit(":"),
    ),
)
BARE_ARRAY: Final = OpenerDef(
    "array",
    (
        lit("["),
        cls(r"\s", 0, 32),
        lit("{"),
        cls(r"\s", 0, 32),
        _QUOTE,
        lit(*_CALL_KEYS),
        _QUOTE,
        cls(r"[ \t]", 0, 8),
        lit(":"),
    ),
)
PYTHONIC: Final = OpenerDef(
    "pythonic",
    (lit("["), cls(r"\s", 0, 32), cls("[A-Za-z_]"), cls(r"[\w.]", 0, 63), cls(r"[ \t]", 0, 8), lit("(")),
)

_NAMED_CONSTANTS: Final[dict[str, Any]] = {
    "True": True,
    "False": False,
    "None": None,
    "true": True,
    "false": False,
    "null": None,
}


class _NotLiteral(Exception):
    pass


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise _NotLiteral
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if not isinstance(k, ast.Constant) or not isinstance(k.value, str):
                raise _NotLiteral
            out[k.value] = _literal(v)
        return out
    if isinstance(node, ast.Name) and node.id in _NAMED_CONSTANTS:
        return _NAMED_CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise _NotLiteral


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def parse_pythonic(
    source: str, known: frozenset[str] | None
) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls of a pythonic list ``[f(a=1), g(b="x")]``; ``None`` when it is not one.

    Only keyword arguments with literal values are accepted (JSON-like constants
    ``true``/``false``/``null`` included); with ``known`` every name must be in it.
    """
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    node = tree.body
    if not isinstance(node, ast.List) or not node.elts:
        return None
    calls: list[tuple[str, dict[str, Any]]] = []
    for elt in node.elts:
        if not isinstance(elt, ast.Call) or elt.args:
            return None
        name = _dotted(elt.func)
        if name is None or (known is not None and name not in known):
            return None
        args: dict[str, Any] = {}
        for kw in elt.keywords:
            if kw.arg is None:
                return None
            try:
                args[kw.arg] = _literal(kw.value)
            except (_NotLiteral, RecursionError):
                return None
        calls.append((name, args))
    return calls


class HermesFormat(Format):
    """``<tool_call>{json}</tool_call>`` (Hermes, Qwen)."""

    sources = {"hermes": "hermes"}
    openers = (HERMES,)
    cut = {"hermes": "<tool_call> without </tool_call>"}
    closer = HERMES_CLOSER
    _closes = staticmethod(fixed_verdict(HERMES_CLOSER))

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """The body runs to ``</tool_call>`` outside a JSON string."""
        return Opened("hermes", end, CloserReader(buf, p, HERMES_CLOSER, self._closes))

    def body_end(self, block: Block) -> int | None:
        """Before ``</tool_call>``."""
        return len(block.raw) - len(HERMES_CLOSER)


class MistralFormat(Format):
    """``[TOOL_CALLS]`` then a JSON list or object, or ``name[ARGS]{...}``."""

    sources = {"mistral": "mistral"}
    openers = MISTRAL
    cut = {"mistral": "[TOOL_CALLS] with unterminated JSON"}

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """The JSON after the head is read to its matching bracket."""
        m = MISTRAL_HEAD.match(buf, p)
        assert m is not None  # the opener matched the same text
        body = m.start(1) if m.group(1) else m.start(3)
        reader = BracketReader(buf, p, body, python=False, cap=MAX_BLOCK_CHARS)
        return Opened("mistral", body, reader, name=m.group(2))


class BareFormat(Format):
    """Bare JSON calls (Llama 3) and pythonic lists: calls only when shaped (and named) as one."""

    sources = {"object": "llama", "array": "json-array", "pythonic": "pythonic"}
    openers = (BARE_OBJECT, BARE_ARRAY, PYTHONIC)
    lenient = frozenset({"object", "array", "pythonic"})

    def open(self, scan: Scan, buf: str, p: int, kind: str, end: int, final: bool) -> Opened | Prose | None:
        """The value is read to its matching bracket."""
        python = kind == "pythonic"
        cap = MAX_PYTHONIC_CHARS if python else MAX_BLOCK_CHARS
        return Opened(kind, p, BracketReader(buf, p, p, python=python, cap=cap))

    def decode(self, block: Block, ctx: Context) -> Outcome:
        """JSON as JSON; a pythonic list through :func:`parse_pythonic`."""
        if block.kind != "pythonic":
            return decode_json(block, ctx, self)
        out = settled(block, ctx, self)
        if out is not None:
            return out
        calls = parse_pythonic(block.raw[block.body : block.body_end], ctx.known)
        if calls is None:
            return Outcome(prose=True)
        return too_deep(calls, block, "pythonic") or Outcome(calls=calls)


FORMATS: Final = (HermesFormat(), MistralFormat(), BareFormat())
