"""Incremental readers: each finds where one action block ends, across any chunking.

A reader is fed the text that follows its opener, chunk by chunk (or all at once),
and answers the index just past the block's end, or ``None`` while the end is not in
sight. Every reader looks at each character a bounded number of times, so reading is
linear whatever the chunking; each keeps only a short tail of context between feeds.
"""

from __future__ import annotations

import re
from typing import Any, Final

from agentfsm.dialects._json import DECODER, MISSING
from agentfsm.dialects.smiley import SMILEY, SMILEY_DELIMITER, SMILEY_RUN

__all__ = [
    "MAX_BLOCK_CHARS",
    "MAX_PYTHONIC_CHARS",
    "BracketReader",
    "CloserReader",
    "Reader",
    "SmileyReader",
    "fence_closes",
]

#: a bare JSON value (or command / Mistral arguments) longer than this is not read
MAX_BLOCK_CHARS: Final = 131_072
#: a pythonic call list longer than this is not read
MAX_PYTHONIC_CHARS: Final = 16_384
_CARRY: Final = 32


class Reader:
    """Collects the raw text of one block, from its opener on."""

    def __init__(self, text: str, start: int) -> None:
        self._text = text
        self._start = start
        self._parts: list[str] | None = None
        #: the block is larger than allowed: everything to the end of the reply is dropped
        self.exceeded = False
        #: a value decoded while reading (bracket fast path), else MISSING
        self.value: Any = MISSING

    def _keep(self, text: str, start: int, end: int) -> None:
        """Record ``text[start:end]`` as part of the block."""
        if self.exceeded:
            return
        if self._parts is None:
            # the first feed is the text the opener was found in: keep it as one slice later
            self._parts = [self._text[self._start : end]] if text is self._text else []
            if text is self._text:
                return
        if end > start:
            self._parts.append(text[start:end])

    @property
    def raw(self) -> str:
        """The block's text so far (empty once it exceeded its limit)."""
        if self._parts is None:
            return ""
        if len(self._parts) != 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0]

    def feed(self, text: str, start: int, final: bool) -> int | None:
        """Read ``text[start:]``; the index just past the block's end, or ``None``."""
        raise NotImplementedError


def fence_closes(s: str, q: int, final: bool) -> int | None:
    """Where the fence closed by the ```` ``` ```` at ``s[q]`` ends; -1: it is no closer; ``None``: not known yet.

    It closes at the start of a line, or right after a ``}`` / ``]`` when only blanks
    follow on its line (those blanks then belong to the block): inside a JSON string a
    fence is never at a line start (a string holds no raw newline) and is always
    followed by more of the string.
    """
    j, lo = q, max(0, q - 9)
    while j > lo and s[j - 1] in " \t":
        j -= 1
    if j > 0 and s[j - 1] in "\n\r":
        return q + 3
    if not (j > 0 and s[j - 1] in "}]"):
        return -1
    k = q + 3
    hi = min(len(s), k + 9)
    while k < hi and s[k] in " \t":
        k += 1
    if k < len(s):
        return k if s[k] in "\r\n" else -1
    return k if final else None


class CloserReader(Reader):
    """A block that ends with a fixed closer (a fence, ``</tool_call>``)."""

    def __init__(self, text: str, start: int, closer: str, fence: bool) -> None:
        super().__init__(text, start)
        self._closer = closer
        self._fence = fence
        self._carry = ""
        #: where the body starts in ``_carry`` (a closer is never searched before it)
        self._floor = 0

    def feed(self, text: str, start: int, final: bool) -> int | None:
        closer = self._closer
        if self._carry:
            s = self._carry + text[start:]
            off = len(self._carry)
            floor = self._floor
            i = max(floor, off - len(closer) - 9)
        else:
            s, off, i = text, start, start
            floor = start
        while True:
            q = s.find(closer, i)
            if q < 0:
                break
            stop = fence_closes(s, q, final) if self._fence else q + len(closer)
            if stop is None:
                break
            if stop >= 0:
                end = stop - off + start
                self._keep(text, start, end)
                return end
            i = q + 1
        self._keep(text, start, len(text))
        self._carry = s[-_CARRY:]
        self._floor = max(0, floor - (len(s) - len(self._carry)))
        return None


class SmileyReader(Reader):
    """A smiley block: it ends with the next run of exactly 14 smileys."""

    def __init__(self, text: str, start: int) -> None:
        super().__init__(text, start)
        self._run = 0

    def feed(self, text: str, start: int, final: bool) -> int | None:
        i, n = start, len(text)
        if self._run:
            m = _RUN.match(text, i)
            length = m.end() - i if m else 0
            total = self._run + length
            if i + length == n and not final:
                self._run = min(total, SMILEY_RUN + 1)
                self._keep(text, start, n)
                return None
            self._run = 0
            if total == SMILEY_RUN:
                self._keep(text, start, i + length)
                return i + length
            i += length
        while True:
            q = text.find(SMILEY_DELIMITER, i)
            if q < 0:
                k = 0
                while k < SMILEY_RUN - 1 and n - k - 1 >= i and text[n - k - 1] == SMILEY:
                    k += 1
                self._run = k
                self._keep(text, start, n)
                return None
            e = _RUN.match(text, q).end()  # type: ignore[union-attr]
            if e == n and not final:
                # the run may go on in the next chunk: carry its length (capped past 14)
                self._run = min(e - q, SMILEY_RUN + 1)
                self._keep(text, start, n)
                return None
            if e - q == SMILEY_RUN:
                self._keep(text, start, e)
                return e
            i = e


_RUN: Final = re.compile(SMILEY + "+")
_OUT_JSON: Final = re.compile('[\\[\\]{}"\u201c\u201d]')
_OUT_PY: Final = re.compile(r"[\[\](){}\"']")
# a string opened by a typographic double quote ends at the next one, whichever way it curls
_IN: Final = {
    '"': re.compile(r'["\\]'),
    "'": re.compile(r"['\\]"),
    "\u201c": re.compile("[\u201c\u201d\\\\]"),
    "\u201d": re.compile("[\u201c\u201d\\\\]"),
}


class BracketReader(Reader):
    """A JSON value (or a pythonic list) whose end is its matching bracket.

    Strings are skipped (with escapes), brackets counted whatever their kind. The C
    decoder is tried first on the text at hand; when it reads a value, that value's end
    is the same bracket this scan would find, and the value is kept for later.
    """

    def __init__(self, text: str, start: int, bracket: int, python: bool, cap: int) -> None:
        super().__init__(text, start)
        self._bracket = bracket
        self._python = python
        self._cap = cap
        self._depth = 0
        self._quote = ""
        self._escape = False
        self._seen = 0
        self._first = True

    def feed(self, text: str, start: int, final: bool) -> int | None:
        if self.exceeded:
            return None
        if self._first:
            self._first = False
            start = self._bracket
            if not self._python:
                try:
                    value, end = DECODER.raw_decode(text, start)
                except (ValueError, RecursionError):
                    pass
                else:
                    if end - start <= self._cap:
                        self.value = value
                        self._keep(text, start, end)
                        return end
                    self._exceed()
                    return None
        stop = min(len(text), start + self._cap - self._seen)
        close = self._scan(text, start, stop)
        if close is not None:
            self._keep(text, start, close)
            return close
        self._seen += stop - start
        if self._seen >= self._cap:
            self._exceed()
        else:
            self._keep(text, start, stop)
        return None

    def _exceed(self) -> None:
        self.exceeded = True
        self._parts = []

    def _scan(self, text: str, i: int, stop: int) -> int | None:
        out = _OUT_PY if self._python else _OUT_JSON
        while i < stop:
            if self._escape:
                self._escape = False
                i += 1
                continue
            if self._quote:
                m = _IN[self._quote].search(text, i, stop)
                if m is None:
                    return None
                i = m.end()
                if m.group() == "\\":
                    self._escape = True
                else:
                    self._quote = ""
                continue
            m = out.search(text, i, stop)
            if m is None:
                return None
            i = m.end()
            c = m.group()
            if c in "\"'\u201c\u201d":
                self._quote = c
            elif c in "[{(":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth <= 0:
                    return i
        return None
