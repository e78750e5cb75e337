"""Reading the JSON of one action: the C decoder first, then a bounded repair.

The fast path is ``json``'s C decoder. Only when it fails does the text go, within
size, depth and per-reply budgets, through a smart-quote normaliser and then the
``json_repair`` library (which is slow and superlinear on garbage, hence the caps).
JSON that stops before its end (an unterminated string, unclosed brackets) is never
repaired in a reply: completing it would run an action that was cut off (data, read for
what a model could copy, is: :attr:`RepairBudget.lossy`). Nothing here raises:
every failure is a :class:`Read` with a problem code.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final

import json_repair

from agentfsm.dialects._shape import (
    MAX_DEPTH,
    TOO_DEEP,
    deeper_than,
    deeper_text,
    normalize_smart_quotes,
    structure,
)
from agentfsm.core._json_walk import map_strings, without_lone_surrogates
from agentfsm.core.client_json import INT64_MIN, UINT64_MAX
from agentfsm.core.parsed import ProblemCode

__all__ = [
    "MAX_REPAIR_CHARS",
    "MAX_REPAIR_DEPTH",
    "MAX_REPAIRS",
    "MISSING",
    "DECODER",
    "JSON_WS",
    "Read",
    "RepairBudget",
    "out_of_range",
    "read_json",
]

#: the largest block handed to json_repair, and the total per reply
MAX_REPAIR_CHARS: Final = 16_384
#: blocks nested deeper than this are not repaired
MAX_REPAIR_DEPTH: Final = 32
#: at most this many blocks of one reply go to json_repair (each call costs ~0.3 ms)
MAX_REPAIRS: Final = 16


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


class _ConstantError(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _ConstantError(name)


#: the decoder every action goes through: standard JSON, with NaN and Infinity refused
DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
#: JSON whitespace (what may stand between tokens), matched from a position
JSON_WS: Final = re.compile(r"[ \t\n\r]*")
# only whitespace from here to the end (as str.rstrip sees it, without copying the text)
_BLANK_TAIL = re.compile(r"\s*\Z")
_BRACKETS = re.compile(r"[\[\]{}]")
_SMART = ("\u201c", "\u201d", "\u2018", "\u2019", "\u201e")
# escape pairs, left to right (so ``\\\\f`` is a backslash then ``f``): a surrogate pair first
_ESCAPE = re.compile(r"\\(u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|.)", re.DOTALL)


@dataclass(slots=True)
class RepairBudget:
    """How many characters json_repair may still be given while parsing one reply."""

    remaining: int = MAX_REPAIR_CHARS
    calls: int = MAX_REPAIRS
    #: reading data, not a reply: JSON cut off, or that a repair reads only in part, is
    #: read as a model that copies it would complete it (never run: see DataScan)
    lossy: bool = False


@dataclass(slots=True)
class Read:
    """The outcome of reading one JSON text."""

    value: Any = MISSING
    #: why the text needed repair (``None`` when it was valid JSON)
    repaired: str | None = None
    #: set when nothing could be read
    code: ProblemCode | None = None
    message: str = ""
    #: offset of the error within the text
    position: int | None = None

    @property
    def ok(self) -> bool:
        return self.value is not MISSING


class Multi(list[Any]):
    """Several JSON values written one after another in one block."""


def read_json(text: str, budget: RepairBudget, pre: Any = MISSING) -> Read:
    """Read ``text`` as JSON (``pre``: a value already decoded from it)."""
    if pre is not MISSING:
        return _clean(text, Read(pre))
    if deeper_text(text):
        return Read(code="limit_exceeded", message=TOO_DEEP)
    try:
        return _clean(text, Read(DECODER.decode(text)))
    except _ConstantError as exc:
        return Read(code="invalid_json", message=f"{exc} is not allowed in JSON")
    except RecursionError:
        return Read(code="limit_exceeded", message=TOO_DEEP)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            values = _several(text)
            if values is not None:
                return _clean(text, Read(values))
        elif not budget.lossy and (exc.msg.startswith("Unterminated string") or _BLANK_TAIL.match(text, exc.pos)):
            # never completed by repair: an action that stops mid-JSON was cut off
            where = f"{exc.msg} (line {exc.lineno} column {exc.colno})"
            return Read(code="invalid_json", message=f"unterminated JSON: {where}", position=exc.pos)
        return _repair(text, exc, budget)
    except ValueError as exc:  # int() refuses numbers of more than 4300 digits
        return Read(code="limit_exceeded", message=f"number too long: {str(exc)[:80]}")


def _several(text: str) -> Multi | None:
    values = Multi()
    i = JSON_WS.match(text, 0).end()  # type: ignore[union-attr]
    try:
        while i < len(text):
            value, i = DECODER.raw_decode(text, i)
            values.append(value)
            i = JSON_WS.match(text, i).end()  # type: ignore[union-attr]
    except (ValueError, RecursionError):
        return None
    return values


def _depth(text: str) -> int:
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        if m.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


def _repair(text: str, exc: json.JSONDecodeError, budget: RepairBudget) -> Read:
    where = f"{exc.msg} (line {exc.lineno} column {exc.colno})"
    if len(text) > MAX_REPAIR_CHARS or len(text) > budget.remaining or budget.calls <= 0:
        return Read(
            code="limit_exceeded",
            message=f"invalid JSON beyond the repair limits ({len(text)} characters): {where}",
            position=exc.pos,
        )
    if _depth(text) > MAX_REPAIR_DEPTH:
        return Read(code="limit_exceeded", message=f"invalid JSON nested too deeply: {where}")
    budget.remaining -= len(text)
    budget.calls -= 1
    candidate = text
    if any(q in text for q in _SMART):
        candidate = normalize_smart_quotes(text)
        try:
            return _clean(candidate, Read(DECODER.decode(candidate), repaired="smart quotes"))
        except (ValueError, RecursionError):
            pass
    value: Any
    escaped, cut = structure(candidate)
    if cut and not budget.lossy:
        # never completed by repair: JSON that stops inside a string or an open bracket
        # was cut off (by the token limit, or by a closer written mid-value)
        return Read(code="invalid_json", message=f"unterminated JSON: {where}", position=exc.pos)
    if escaped is not candidate:
        # raw line breaks inside strings, escaped exactly; if that does not make it JSON,
        # the quotes themselves are broken (a string runs across a closer), so no repair
        try:
            value = DECODER.decode(escaped)
        except (ValueError, RecursionError):
            message = f"invalid JSON (a string holds raw control characters): {where}"
            return Read(code="invalid_json", message=message, position=exc.pos)
        return _clean(escaped, Read(value, repaired="raw control characters in strings escaped"))
    before = candidate
    candidate, saved = _protect_strings(candidate)
    if (hole := _PLACEHOLDER.search(candidate)) is not None:
        # the contract's own notation (``<tool name>``, ``<its parameters>``) echoed where a
        # value goes: json_repair would read ``<a>`` as the string "a>", a value never written
        return Read(
            code="invalid_json",
            message=f"invalid JSON: the placeholder {hole.group(1)[:40]} stands where a value goes",
            position=exc.pos,
        )
    if "\\" in candidate:
        candidate = _ESCAPE.sub(_plain_escape, candidate)
    try:
        value = json_repair.loads(candidate, skip_json_loads=True)
    except Exception:  # a foreign library: whatever it raises means "unreadable"
        value = MISSING
    if saved and isinstance(value, (dict, list)):
        value = map_strings(value, lambda s: _restore(s, saved))
    if not isinstance(value, (dict, list)) or out_of_range(value) is not None:
        return Read(code="invalid_json", message=f"invalid JSON: {where}", position=exc.pos)
    if not budget.lossy and not _lossless(before, value):
        return Read(
            code="invalid_json",
            message=f"invalid JSON (a repair would drop part of it): {where}",
            position=exc.pos,
        )
    return _clean(candidate, Read(value, repaired=f"repaired invalid JSON: {where}"))


#: an unquoted ``<...>`` where a key or value goes (strings are protected before the search)
_PLACEHOLDER = re.compile(r"[{\[,:]\s*(<[^<>\"\n]{0,80}>)")
_PY_LITERALS = re.compile(r"\b(?:None|True|False)\b")
_PY_JSON = {"None": "null", "True": "true", "False": "false"}


def _ascii_alnum(text: str) -> str:
    return "".join(c for c in text.lower() if c.isascii() and c.isalnum())


def _lossless(original: str, value: Any) -> bool:
    """Whether a repair kept every letter and digit of the original, in order.

    json-repair fixes quotes, commas and brackets, but on some inputs it silently drops
    content (``{"x": 2+2}`` becomes ``{"x": 2}``). Such a repair would run the tool
    with arguments the model never wrote, so it is refused. Linear in the text.
    """
    try:
        dumped = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        return False
    have = _ascii_alnum(dumped)

    def kept(text: str) -> bool:
        rest = iter(have)
        return all(ch in rest for ch in _ascii_alnum(text))

    # Python literals (None/True/False) become null/true/false; inside a string they stay
    return kept(original) or kept(_PY_LITERALS.sub(lambda m: _PY_JSON[m.group()], original))


_MARK = "\ue000"
_STRING_END = re.compile(r'["\\]')


def _protect_strings(text: str) -> tuple[str, list[str]]:
    """Swap each well-formed, well-placed string literal for a placeholder.

    json_repair mangles some escapes (``\\f``, a ``\\u`` after ``\\\\``, a trailing
    ``\\n``); the literals the C decoder reads are kept out of its hands and put back
    after. A literal is well placed between ``{ [ , :`` and ``: , } ]``.
    """
    if _MARK in text:
        return text, []
    out: list[str] = []
    saved: list[str] = []
    n, last, i = len(text), 0, 0
    while (q := text.find('"', i)) >= 0:
        j = q + 1
        while (m := _STRING_END.search(text, j)) is not None and m.group() == "\\":
            j = m.end() + 1
        if m is None:
            break
        end = m.end()
        before, after = q - 1, end
        while before >= 0 and text[before] in " \t\r\n":
            before -= 1
        while after < n and text[after] in " \t\r\n":
            after += 1
        if (before < 0 or text[before] in "{[,:") and (after == n or text[after] in ":,}]"):
            try:
                value = json.loads(text[q:end])
            except ValueError:
                pass
            else:
                out.append(text[last:q])
                out.append(f'"{_MARK}{len(saved)}{_MARK}"')
                saved.append(value)
                last = end
        i = end
    out.append(text[last:])
    return "".join(out), saved


def _restore(s: str, saved: list[str]) -> str:
    if s.startswith(_MARK) and s.endswith(_MARK) and s[1:-1].isdigit():
        k = int(s[1:-1])
        if k < len(saved):
            return saved[k]
    return s


def _plain_escape(m: re.Match[str]) -> str:
    """Rewrite the escapes json_repair misreads (``\\f``, ``\\/``, surrogate pairs) equivalently."""
    esc = m.group(1)
    if len(esc) == 11:
        return str(json.loads(f'"\\{esc}"'))
    return {"f": "\\u000c", "/": "/"}.get(esc, m.group())


def out_of_range(value: Any) -> str | None:
    """The first number of ``value`` that a JSON reader cannot take as it is written, named
    ("the integer 123..."): a float that overflowed (``1e999`` reads as infinity, which JSON cannot write) or
    an integer outside the 64-bit range (the proxy's own limit on numbers, and what an
    upstream reads); ``None`` when there is none. Iterative."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return "a number that overflows to infinity"
        if isinstance(item, int) and not isinstance(item, bool) and not INT64_MIN <= item <= UINT64_MAX:
            text = str(item)
            return f"the integer {text if len(text) <= 24 else f'{text[:13]}... ({len(text)} characters)'}"
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return None


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _clean(text: str, read: Read) -> Read:
    """Refuse a value nested too deep; replace lone surrogates (from ``\\ud800`` escapes or raw) by U+FFFD."""
    if text.count("{") + text.count("[") > MAX_DEPTH and deeper_than(read.value):
        return Read(code="limit_exceeded", message=TOO_DEEP)
    escapes = "\\" in text and ("\\ud" in text or "\\uD" in text)
    if escapes or (not text.isascii() and _has_lone_surrogate(text)):
        changed: list[str] = []

        def fix(s: str) -> str:
            if _has_lone_surrogate(s):
                changed.append(s)
                return without_lone_surrogates(s)
            return s

        read.value = map_strings(read.value, fix)
        if changed:
            read.repaired = read.repaired or "lone surrogates replaced by U+FFFD"
    return read
