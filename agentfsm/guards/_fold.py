"""Folding: text as a model that copies it retypes it, for comparing data with a reply.

A model that copies an action out of data does not copy code points: it writes a Latin
``e`` for a Cyrillic ``е``, ``delete_all`` for ``DELETE_ALL``, and leaves out marks that
show nothing (a combining grapheme joiner, a variation selector, a Hangul filler). Two
texts that fold alike read alike to a model; :func:`fold` is used to compare names,
keys and values (never to change what is sent or run).

The look-alikes are those of Unicode's confusables data (UTS #39) that a Latin letter or
digit stands for, in the Cyrillic, Greek, Armenian and Latin (IPA) blocks; no library
with that table is a dependency, and this short part of it covers the letters a tool
name or a JSON key is written with.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

__all__ = ["INVISIBLE", "fold", "visible"]

#: look-alike (after case folding) -> the ASCII letter or digit it shows
_LOOK_ALIKES: Final = {
    # Cyrillic (upper case folds to lower: "в" stands for "В", which shows "B")
    "а": "a", "в": "b", "ԁ": "d", "е": "e", "һ": "h", "н": "h", "і": "i", "ӏ": "l",
    "ј": "j", "к": "k", "м": "m", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s", "т": "t",
    "с": "c", "у": "y", "ү": "y", "х": "x", "ԝ": "w", "ѵ": "v",
    # Greek
    "α": "a", "β": "b", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "ϲ": "c", "ϳ": "j",
    # Armenian
    "օ": "o", "ս": "u", "ց": "g", "հ": "h", "ո": "n", "զ": "q",
    # Latin: IPA and dotless letters
    "ɡ": "g", "ɑ": "a", "ı": "i", "ȷ": "j", "ɩ": "i", "ᴄ": "c", "ᴏ": "o", "ᴠ": "v", "ᴡ": "w", "ᴢ": "z",
}
_TABLE: Final = str.maketrans(_LOOK_ALIKES)

#: code points that show nothing and are no format character (category Cf, removed by
#: the caller's NFKC step): combining grapheme joiner, Hangul and Khmer fillers,
#: Mongolian variation selectors, variation selectors, the braille blank
INVISIBLE: Final = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]"
)


def visible(text: str) -> str:
    """``text`` without the code points that show nothing (see :data:`INVISIBLE`)."""
    return text if text.isascii() else INVISIBLE.sub("", text)


def fold(text: str) -> str:
    """``text`` as compared: NFKC, case folded, without format characters or code points
    that show nothing, each look-alike as the letter it shows."""
    if text.isascii():
        return text.casefold()
    text = unicodedata.normalize("NFKC", visible(text)).casefold()
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return text.translate(_TABLE)
