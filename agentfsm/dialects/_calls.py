"""From a decoded JSON value to tool calls: key aliases, stringified arguments, shapes.

Accepted shapes: ``{"tool"|"name"|"function": NAME, "parameters"|"arguments"|"args"|"input": {...}}``,
OpenAI's ``{"type": "function", "function": {"name", "arguments"}}``, json-protocol's
``{"thought", "action": {...} | [...]}`` and ``{"final": {"content": ...}}``,
``{"tool_calls": [...]}``, and lists of calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from agentfsm.dialects._json import MISSING, RepairBudget, read_json
from agentfsm.core.parsed import ProblemCode

__all__ = ["ARGS_KEYS", "NAME_KEYS", "Found", "find_calls", "plain_call"]

NAME_KEYS: Final = ("tool", "name", "function")
ARGS_KEYS: Final = ("parameters", "arguments", "args", "input")


@dataclass(slots=True)
class Found:
    """Calls found in one value, with what was repaired or rejected on the way."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: ``(code, message, rejected)``
    notes: list[tuple[ProblemCode, str, bool]] = field(default_factory=list)
    final: Any = MISSING
    thought: Any = None
    #: the value had json-protocol's shape (``thought`` / ``action`` / ``final``)
    protocol: bool = False


def find_calls(
    value: Any, *, loose: bool, known: frozenset[str] | None, budget: RepairBudget
) -> Found | None:
    """The calls in ``value``; ``None`` when it does not have the shape of an action.

    ``loose`` (a delimited action block): a name without arguments is a call, and a
    broken item is a ``malformed_action`` note. Otherwise (bare JSON, a plain json
    fence) an arguments key is required, every item must be a call, and with ``known``
    every name must be a known tool.
    """
    found = Found()
    if isinstance(value, dict):
        if "final" in value and "action" not in value and not _has_name(value):
            found.protocol = True
            final = value["final"]
            if isinstance(final, dict) and "content" in final:
                final = final["content"]
            found.final = final
            return found
        if "action" in value:
            found.protocol = True
            found.thought = value.get("thought")
            action = value["action"]
            items = action if isinstance(action, list) else [action]
            return found if _collect(items, found, True, known, budget) else None
        if isinstance(value.get("tool_calls"), list):
            return found if _collect(value["tool_calls"], found, True, known, budget) else None
        return found if _collect([value], found, loose, known, budget) else None
    if isinstance(value, list) and value:
        return found if _collect(value, found, loose, known, budget) else None
    return None


_SPECIAL: Final = ("action", "final", "tool_calls")


def plain_call(value: Any) -> tuple[str, dict[str, Any]] | None:
    """The common case, quickly: ``{NAME_KEY: "name", ARGS_KEY: {...}}`` and nothing special.

    Gives what :func:`find_calls` gives for such a value, or ``None`` to leave it to it.
    """
    if type(value) is not dict or any(k in value for k in _SPECIAL):
        return None
    key = next((k for k in NAME_KEYS if k in value), None)
    args_key = next((k for k in ARGS_KEYS if k in value), None)
    if key is None or args_key is None:
        return None
    name, args = value[key], value[args_key]
    if type(name) is not str or type(args) is not dict or not name or name != name.strip():
        return None
    return name, args


def _has_name(d: dict[str, Any]) -> bool:
    return any(k in d for k in NAME_KEYS)


def _collect(
    items: list[Any],
    found: Found,
    loose: bool,
    known: frozenset[str] | None,
    budget: RepairBudget,
) -> bool:
    """Add every item's call to ``found``; ``False`` when the items are not an action."""
    for item in items:
        one = _one(item, loose, known, budget) if isinstance(item, dict) else None
        if one is None:
            if not loose:
                return False
            found.notes.append(("malformed_action", "an action without a tool name", True))
        elif isinstance(one, str):
            if not loose:
                return False
            found.notes.append(("malformed_action", one, True))
        else:
            name, args, note = one
            found.calls.append((name, args))
            if note:
                found.notes.append(("repaired_json", note, False))
    return bool(found.calls) or loose


def _one(
    d: dict[str, Any], loose: bool, known: frozenset[str] | None, budget: RepairBudget
) -> tuple[str, dict[str, Any], str | None] | str | None:
    """``(name, args, repair note)``, a rejection message, or ``None`` (not a call)."""
    src = d["function"] if isinstance(d.get("function"), dict) else d
    key = next((k for k in NAME_KEYS if k in src), None)
    if key is None:
        return None
    name = src[key]
    args_key = next((k for k in ARGS_KEYS if k in src), None)
    if not isinstance(name, str) or not name.strip():
        return f"the tool name must be a non-empty string, got {_short(name)}"
    name = name.strip()
    if not loose:
        if known is not None and name not in known:
            return None
        if args_key is None and known is None:
            return None
    if args_key is None:
        return name, {}, None
    args = src[args_key]
    if isinstance(args, dict):
        return name, args, None
    if args is None:
        return name, {}, None
    if isinstance(args, str):
        text = args.strip()
        if not text:
            return name, {}, None
        read = read_json(text, budget)
        if isinstance(read.value, dict):
            return name, read.value, "the arguments were a JSON string"
    return f"the arguments of {name!r} must be a JSON object, got {_short(args)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."
