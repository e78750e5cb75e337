"""Words and values compared the same way in every script.

A user types "café" decomposed (``e`` and a combining accent) and the model writes it
composed; a user writes "İstanbul" and the model "Istanbul"; a full-width "Ｐａｒｉｓ", a
zero-width space pasted inside a name, "Łódź" written "Lodz" and "Tromsø" "Tromso": each is
the same value. :func:`fold` is the form values are compared in (Unicode compatibility
decomposition, accents and other combining marks left out, zero-width and other format
characters left out, case folded, and the Latin letters that carry their mark inside them,
which no decomposition takes apart, written as their base letters: :data:`LATIN_BASES`), and
:func:`words` reads a text's words in any script: runs of letters, digits and the marks
that belong to them (a Devanagari or Thai vowel sign is part of its word, not a break).

Both run on every decision over the whole conversation (a long Claude Code session is
hundreds of kilobytes, nearly all ASCII): ASCII text, which has no combining mark, format
character nor case beyond ``lower``, is handled by the regular expression engine and
:meth:`str.lower` alone, and only the runs of other characters are read one by one.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LATIN_BASES", "fold", "runs_together", "spaceless", "words", "wide"]

#: one or more ASCII characters that are no letter nor digit (``_`` among them)
_ASCII_GAP = re.compile(r"[\x00-/:-@\[-`{-\x7f]+")
#: one other character that is no letter nor digit: a mark among them is part of a word
_WIDE_GAP = re.compile(r"[^\x00-\x7f\w]")
#: a run of characters outside ASCII
_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")
#: Latin letters (case folded) whose stroke, slash or dotlessness is part of the letter, so
#: NFKD leaves them whole, as their base letters: Turkish ı, Polish ł, Nordic ø, æ, ð and
#: þ, Croatian and Vietnamese đ, Maltese ħ, œ. A model (or a keyboard) writes them so.
LATIN_BASES = str.maketrans(
    {"ı": "i", "ł": "l", "ø": "o", "đ": "d", "ð": "d", "þ": "th", "æ": "ae", "œ": "oe", "ħ": "h", "ŧ": "t", "ŀ": "l"}
)


def fold(text: str) -> str:
    """``text`` as values are compared: NFKD, combining marks and format characters (Cf:
    zero-width spaces and joiners, bidi marks) left out, recomposed (NFC: Hangul), case
    folded, the letters of :data:`LATIN_BASES` as their base letters."""
    if text.isascii():
        return text.lower()
    kept = _NOT_ASCII.sub(_kept, unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFC", kept).casefold().translate(LATIN_BASES)


def _kept(match: re.Match[str]) -> str:
    return "".join(c for c in match.group() if not unicodedata.combining(c) and unicodedata.category(c) != "Cf")


def _gap(match: re.Match[str]) -> str:
    c = match.group()
    return c if unicodedata.category(c).startswith("M") else " "


def words(text: str) -> list[str]:
    """The words of ``text``, in any script: runs of letters, digits and marks."""
    spaced = _ASCII_GAP.sub(" ", text)
    return (spaced if spaced.isascii() else _WIDE_GAP.sub(_gap, spaced)).split()


def _is_wide(c: str) -> bool:
    """A wide character: CJK, kana, Hangul (East Asian width W or F)."""
    return unicodedata.east_asian_width(c) in "WF"


def wide(word: str) -> int:
    """How many letters ``word`` is worth: a wide character two, as it writes a syllable
    or more; any other one."""
    return sum(2 if _is_wide(c) else 1 for c in word)


#: a character of a script that writes no space between words (their Unicode blocks):
#: Thai, Lao, Tibetan, Myanmar, Khmer; CJK radicals, symbols and punctuation, kana,
#: Bopomofo, the CJK ideographs (extensions and compatibility forms included)
_SPACELESS = re.compile(
    "[\u0e00-\u0fff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3000-\u312f\u3190-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]"
)


def spaceless(text: str) -> bool:
    """Whether ``text`` holds a character of a script that writes no space between words
    (Chinese, Japanese, Thai, Lao, Tibetan, Myanmar, Khmer): its words cannot be told
    apart by white space. Korean, written with spaces, is not among them."""
    return _SPACELESS.search(text) is not None


def runs_together(text: str) -> bool:
    """Whether ``text`` is written in a script that runs words and particles together, so
    a value is looked for anywhere in it, not as a word: :func:`spaceless`, or a wide
    character (Hangul, whose particles join the word before them: "서울은")."""
    return spaceless(text) or any(map(_is_wide, text))
