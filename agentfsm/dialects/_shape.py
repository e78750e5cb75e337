"""The shape of a JSON text, read without decoding it: where it was cut, how deep a value
nests, typographic quotes used as delimiters. Each pass is linear in the text."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from agentfsm.core._json_walk import nests_deeper

__all__ = [
    "MAX_DEPTH",
    "TOO_DEEP",
    "Unclosed",
    "deeper_than",
    "deeper_text",
    "normalize_smart_quotes",
    "structure",
    "unclosed",
]

#: a value (arguments, a final answer) nested deeper than this is refused (serde_json's
#: limit, as for client JSON): deeper values cannot be re-encoded or serialised
MAX_DEPTH: Final = 128
#: the message of a value refused for its depth (one wording, whichever check saw it)
TOO_DEEP: Final = f"JSON nested deeper than {MAX_DEPTH} levels"
# everything up to the next bracket outside a string (possessive: linear)
_TO_BRACKET: Final = re.compile(r'(?:[^"\[\]{}]++|"(?:[^"\\]++|\\.)*+")*+', re.DOTALL)


def deeper_text(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests brackets (outside strings) more than ``limit`` deep.

    Decided before decoding, so that the answer never depends on how much of Python's
    recursion limit the caller's stack left to the decoder. Stops at the first bracket
    past the limit; a text with at most ``limit`` brackets is answered at C speed.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, i, n = 0, 0, len(text)
    while True:
        i = _TO_BRACKET.match(text, i).end()  # type: ignore[union-attr]
        if i >= n or text[i] == '"':
            return False
        if text[i] in "[{":
            depth += 1
            if depth > limit:
                return True
        elif depth:
            depth -= 1
        i += 1

_STRUCT = re.compile(r'["\[\]{}]')
_IN_STRING = re.compile(r'["\\\x00-\x1f]')


def structure(text: str) -> tuple[str, bool]:
    """``(text with raw control characters inside strings escaped, cut)``.

    ``cut``: the text stops inside a string or with a bracket still open, so it was
    cut off and is never repaired. The text itself is returned when nothing needed
    escaping. Linear: each character is looked at once.
    """
    parts: list[str] = []
    depth = i = last = 0
    n = len(text)
    while (m := _STRUCT.search(text, i)) is not None:
        c = m.group()
        i = m.end()
        if c == '"':
            while True:
                k = _IN_STRING.search(text, i)
                if k is None:
                    return text, True
                ch = k.group()
                i = k.end()
                if ch == '"':
                    break
                if ch == "\\":
                    i += 1
                    if i > n:
                        return text, True
                    continue
                parts.append(text[last : k.start()])
                parts.append(json.dumps(ch)[1:-1])
                last = i
        elif c in "[{":
            depth += 1
        elif depth:
            depth -= 1
    if depth:
        return text, True
    if not parts:
        return text, False
    parts.append(text[last:])
    return "".join(parts), False


@dataclass(frozen=True, slots=True)
class Unclosed:
    """What a JSON text cut off mid-way leaves open at its end."""

    #: where the string open at the end begins (its quote); None when none is open
    string: int | None
    #: the brackets that close the open arrays and objects, innermost first
    closers: str
    #: the text ends inside a string on a lone backslash
    escape: bool


_STRING_BODY = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)


def unclosed(text: str) -> Unclosed:
    """What is open at the end of ``text`` (one linear pass, strings skipped whole)."""
    stack: list[str] = []
    i, n = 0, len(text)
    while (m := _STRUCT.search(text, i)) is not None:
        c = m.group()
        i = m.end()
        if c == '"':
            body = _STRING_BODY.match(text, i)
            end = body.end() if body is not None else i
            if end >= n or (end == n - 1 and text[end] == "\\"):
                return Unclosed(m.start(), "".join(reversed(stack)), end == n - 1)
            i = end + 1
        elif c in "[{":
            stack.append("]" if c == "[" else "}")
        elif stack:
            stack.pop()
    return Unclosed(None, "".join(reversed(stack)), False)


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep (iteratively)."""
    return nests_deeper(value, limit)


def _structural_follows(s: str, j: int) -> bool:
    n = len(s)
    while j < n and s[j] in " \t\r\n":
        j += 1
    return j == n or s[j] in ":,}]"


def normalize_smart_quotes(s: str) -> str:
    """Turn typographic quotes used as JSON delimiters into ``"``, leaving apostrophes alone.

    A smart quote opens a string only outside strings; inside a string opened by a smart
    quote, only the matching closer followed by ``: , } ]`` (or the end) closes it, so
    ``it’s`` inside ``“...”`` or ``‘...’`` survives. Straight-quoted strings are copied.
    """
    out: list[str] = []
    closers = ""
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if not closers:
            if c == '"':
                closers = '"'
            elif c in "\u201c\u201d\u201e":
                closers, c = '\u201d\u201c"', '"'
            elif c in "\u2018\u2019":
                closers, c = "\u2019\u2018", '"'
        elif c == "\\" and i + 1 < n:
            out.append(s[i : i + 2])
            i += 2
            continue
        elif c in closers and (c == '"' and closers == '"' or _structural_follows(s, i + 1)):
            closers, c = "", '"'
        elif c == '"':
            c = '\\"'
        out.append(c)
        i += 1
    return "".join(out)
