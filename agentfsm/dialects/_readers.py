"""Incremental readers: each finds where one action block ends, across any chunking.

A reader is fed the text that follows its opener, chunk by chunk (or all at once),
and answers the index just past the block's end, or ``None`` while the end is not in
sight. Every reader looks at each character a bounded number of times, so reading is
linear whatever the chunking; each keeps only a short tail of context between feeds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final, TypeAlias

from agentfsm.dialects._json import DECODER, JSON_WS, MISSING

__all__ = [
    "MAX_BLOCK_CHARS",
    "MAX_PYTHONIC_CHARS",
    "BracketReader",
    "CloserReader",
    "Closes",
    "Reader",
    "fence_closes",
    "fence_verdict",
    "fixed_verdict",
]

#: a bare JSON value (or command / Mistral arguments) longer than this is not read
MAX_BLOCK_CHARS: Final = 131_072
#: a pythonic call list longer than this is not read
MAX_PYTHONIC_CHARS: Final = 16_384


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
        #: text read in an earlier feed that turned out to follow the block's end (its
        #: closer was only settled by later text): the scanner reads it again
        self.given_back = ""

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


_OUT_JSON: Final = re.compile('[\\[\\]{}"\u201c\u201d]')
_OUT_PY: Final = re.compile(r"[\[\](){}\"']")
# a string opened by a typographic double quote ends at the next one, whichever way it curls
_IN: Final = {
    '"': re.compile(r'["\\]'),
    "'": re.compile(r"['\\]"),
    "\u201c": re.compile("[\u201c\u201d\\\\]"),
    "\u201d": re.compile("[\u201c\u201d\\\\]"),
}


#: what a closer check answers: ``(stop, next)``; ``stop`` is the index just past the
#: block's end, -1 when the text at ``q`` is no closer (search on from ``next``), or
#: ``None`` when that is not known until more text comes
Verdict: TypeAlias = tuple[int | None, int]
Closes: TypeAlias = Callable[[str, int, bool], Verdict]
_QUOTES: Final = '"\u201c\u201d'
#: how many characters before the resume point a closer check may look at
_LOOKBACK: Final = 12


def fence_verdict(s: str, q: int, final: bool) -> Verdict:
    """:func:`fence_closes` as a closer check."""
    return fence_closes(s, q, final), q + 1


def fixed_verdict(closer: str) -> Closes:
    """A closer check for a fixed closer that always closes (``</tool_call>``)."""
    size = len(closer)
    return lambda s, q, final: (q + size, q + size)


@lru_cache(maxsize=16)
def _patterns(first: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """For a closer starting with ``first``: the search for a quote or ``first``, and the
    match of everything before one (whole strings included; possessive, so linear)."""
    x = re.escape(first)
    out = re.compile(f'["\u201c\u201d{x}]')
    skip = re.compile(
        f'(?:[^"\u201c\u201d{x}]++'
        r'|"(?:[^"\\]++|\\.)*+"'
        r"|[\u201c\u201d](?:[^\u201c\u201d\\]++|\\.)*+[\u201c\u201d])*+",
        re.DOTALL,
    )
    return out, skip


class CloserReader(Reader):
    """A block that ends with a closer (a fence, ``</tool_call>``, a smiley run ...).

    When the body is JSON (its first non-blank character is ``{`` or ``[``), a closer
    inside a JSON string does not count: strings are skipped as the bracket reader skips
    them (``"`` with escapes, and typographic quotes), raw newlines and all, so a string
    that holds a fence or ``</tool_call>`` never ends the block early. A complete JSON
    value is first read by the C decoder (kept for decoding when the closer follows it).
    """

    def __init__(self, text: str, start: int, closer: str, closes: Closes) -> None:
        super().__init__(text, start)
        self._closer = closer
        self._closes = closes
        self._out, self._skip = _patterns(closer[0])
        #: 0: no body character seen yet; 1: a JSON body; 2: any other body
        self._mode = 0
        self._quote = ""
        self._escape = False
        self._carry = ""
        self._floor = 0
        self._decoded: Any = MISSING
        self._decoded_end = -1

    def feed(self, text: str, start: int, final: bool) -> int | None:
        if self._carry:
            s = self._carry + text[start:]
            off = len(self._carry)
            i = self._floor
        else:
            s, off, i = text, start, start
        stop, resume = self._scan(s, i, final)
        # a value read by the C decoder is kept only when its closer came in the same text
        self._decoded, self._decoded_end = MISSING, -1
        if stop is not None:
            if stop < off:
                # the block ended inside text kept already (``</function>``, then text that
                # turned out not to be the wrapper's ``</tool_call>``): give that text back
                self.given_back = s[stop:off]
                raw = self.raw
                self._parts = [raw[: len(raw) - len(self.given_back)]]
                return start - len(self.given_back)
            end = stop - off + start
            self._keep(text, start, end)
            return end
        self._keep(text, start, len(text))
        base = max(0, resume - _LOOKBACK)
        self._carry = s[base:]
        self._floor = resume - base
        return None

    def _find_plain(self, s: str, i: int, final: bool) -> tuple[int, bool]:
        """In a body that is not JSON: ``(q, True)`` for a possible closer at ``q``;
        ``(resume, False)`` when there is none before ``resume`` (the end, or a tail that
        must be looked at again with more text)."""
        q = s.find(self._closer[0], i)
        return (q, True) if q >= 0 else (len(s), False)

    def _scan(self, s: str, i: int, final: bool) -> tuple[int | None, int]:
        """``(stop, q)`` when the block ends; ``(None, resume)`` otherwise."""
        n = len(s)
        if self._mode == 0:
            i = JSON_WS.match(s, i).end()  # type: ignore[union-attr]
            if i == n:
                return None, n
            if s[i] in "{[":
                self._mode = 1
                try:
                    self._decoded, self._decoded_end = DECODER.raw_decode(s, i)
                except (ValueError, RecursionError):
                    pass
                else:
                    i = self._decoded_end
            else:
                self._mode = 2
        closer, first = self._closer, self._closer[0]
        while True:
            if self._mode == 2:
                q, candidate = self._find_plain(s, i, final)
                if not candidate:
                    return None, q
            else:
                if self._escape:
                    if i >= n:
                        return None, n
                    self._escape = False
                    i += 1
                    continue
                if not self._quote:
                    # prose and whole strings at C speed; the loop below sees only the rest
                    i = self._skip.match(s, i).end()  # type: ignore[union-attr]
                elif self._quote:
                    m = _IN[self._quote].search(s, i)
                    if m is None:
                        return None, n
                    i = m.end()
                    if m.group() == "\\":
                        self._escape = True
                    else:
                        self._quote = ""
                    continue
                m = self._out.search(s, i)
                if m is None:
                    return None, n
                q = m.start()
                if m.group() in _QUOTES:
                    self._quote = m.group()
                    i = q + 1
                    continue
            if s.startswith(closer, q):
                stop, nxt = self._closes(s, q, final)
            elif n - q < len(closer) and closer.startswith(s[q:]):
                stop, nxt = (-1, n) if final else (None, q)
            else:
                stop, nxt = -1, q + 1
            if stop is None:
                return None, q
            if stop >= 0:
                if self._decoded_end >= 0 and JSON_WS.match(s, self._decoded_end, q).end() == q:  # type: ignore[union-attr]
                    self.value = self._decoded
                return stop, q
            i = nxt


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
