"""Words and values compared the same way in every script.

A user types "café" decomposed (``e`` and a combining accent) and the model writes it
composed; a user writes "İstanbul" and the model "Istanbul"; a full-width "Ｐａｒｉｓ", a
zero-width space pasted inside a name: each is the same value. :func:`fold` is the form
values are compared in (Unicode compatibility decomposition, accents and other combining
marks left out, zero-width and other format characters left out, case folded), and
:func:`words` reads a text's words in any script: runs of letters, digits and the marks
that belong to them (a Devanagari or Thai vowel sign is part of its word, not a break).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["fold", "words", "wide"]

#: one character that is no letter nor digit (nor ``_``): a mark among them is part of a word
_GAP = re.compile(r"[\W_]")


def fold(text: str) -> str:
    """``text`` as values are compared: NFKD, combining marks and format characters (Cf:
    zero-width spaces and joiners, bidi marks) left out, recomposed (NFC: Hangul), case folded."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c) and unicodedata.category(c) != "Cf")
    return unicodedata.normalize("NFC", kept).casefold()


def _gap(match: re.Match[str]) -> str:
    c = match.group()
    return c if unicodedata.category(c).startswith("M") else " "


def words(text: str) -> list[str]:
    """The words of ``text``, in any script: runs of letters, digits and marks."""
    return _GAP.sub(_gap, text).split()


def wide(word: str) -> int:
    """How many letters ``word`` is worth: a wide character (CJK, kana, Hangul: East Asian
    width W or F) two, as it writes a syllable or more; any other one."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in word)
