"""Action openers written once, as token sequences, for two uses.

The same definition compiles to a regex (for searching: every quantifier is bounded,
none is nested, so a search is linear) and answers "could this tail still grow into an
opener?" (for streaming: prose is held back only while the answer is yes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

__all__ = ["OpenerDef", "Tok", "cls", "lit"]


@dataclass(frozen=True)
class Tok:
    """One token: a choice of literals (once), or ``lo..hi`` characters of a class."""

    lits: tuple[str, ...] = ()
    char_class: str = ""
    lo: int = 1
    hi: int = 1

    def pattern(self) -> str:
        if self.lits:
            alts = sorted(self.lits, key=len, reverse=True)
            return "(?:" + "|".join(re.escape(a) for a in alts) + ")"
        return f"{self.char_class}{{{self.lo},{self.hi}}}"

    @cached_property
    def char_re(self) -> re.Pattern[str]:
        return re.compile(self.char_class)


def lit(*alternatives: str) -> Tok:
    """A token matching exactly one of ``alternatives``."""
    return Tok(lits=alternatives)


def cls(char_class: str, lo: int = 1, hi: int = 1) -> Tok:
    """A token matching ``lo`` to ``hi`` characters of the regex ``char_class``."""
    return Tok(char_class=char_class, lo=lo, hi=hi)


@dataclass(frozen=True)
class OpenerDef:
    """A named opener: the tokens an action of that kind starts with."""

    kind: str
    toks: tuple[Tok, ...]

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """The compiled search pattern."""
        return re.compile("".join(t.pattern() for t in self.toks))

    @cached_property
    def first_chars(self) -> str:
        """Characters an opener of this kind can start with (its first token is a literal)."""
        return "".join(sorted({a[0] for a in self.toks[0].lits}))

    @cached_property
    def max_len(self) -> int:
        """The longest text an opener of this kind can span."""
        return sum(max(map(len, t.lits)) if t.lits else t.hi for t in self.toks)

    @cached_property
    def prefix_regex(self) -> re.Pattern[str]:
        """Matches (in full) exactly the prefixes of this kind's openers: the tokens
        nested as ``(?:T1(?:T2(?:...)|prefix of T2)|prefix of T1)`` (bounded
        quantifiers, so one match is linear in the short tail it is given)."""
        inner = ""
        for tok in reversed(self.toks):
            if tok.lits:
                cut = sorted({a[:k] for a in tok.lits for k in range(len(a))}, key=len, reverse=True)
                part = "|".join(re.escape(c) for c in cut if c)
                partial = f"(?:{part})?" if part else ""
            else:
                partial = f"{tok.char_class}{{0,{tok.hi}}}"
            inner = f"(?:{tok.pattern()}{inner}|{partial})"
        return re.compile(inner)

    def could_grow(self, text: str, start: int) -> bool:
        """True when ``text[start:]`` is a prefix of some opener (more text could complete it)."""
        head = self.toks[0].lits
        if len(head) == 1:  # the usual case, settled without a match when it fails
            rest = text[start : start + len(head[0])]
            if not head[0].startswith(rest):
                return False
        return self.prefix_regex.fullmatch(text, start) is not None


def _prefix(toks: tuple[Tok, ...], k: int, s: str, i: int) -> bool:
    """The reference for :attr:`OpenerDef.prefix_regex` (tests compare the two)."""
    if i == len(s):
        return True
    if k == len(toks):
        return False
    tok = toks[k]
    if tok.lits:
        rest = s[i : i + max(map(len, tok.lits))]
        for alt in tok.lits:
            if len(rest) < len(alt) and alt.startswith(rest) and i + len(rest) == len(s):
                return True
            if rest.startswith(alt) and _prefix(toks, k + 1, s, i + len(alt)):
                return True
        return False
    count, j = 0, i
    while True:
        if j == len(s):
            return True
        if count >= tok.lo and _prefix(toks, k + 1, s, j):
            return True
        if count == tok.hi or not tok.char_re.fullmatch(s[j]):
            return False
        count += 1
        j += 1
