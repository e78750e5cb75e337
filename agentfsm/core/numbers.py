"""Numbers written in digits: read the same way in every language.

What the language-neutral value checks compare (a call's numbers against the
conversation's): ``12.5``, ``12,5`` (one comma as the decimal mark), ``1,000`` and
``1.000.000`` (thousands), ``-3``. Number words are not read here: they are English, and
only an opt-in language policy reads them.
"""

from __future__ import annotations

import re

__all__ = ["NUMBER", "digits_in", "same", "to_float"]

#: a number written in digits, with its separators
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")


def same(a: float, b: float) -> bool:
    """Whether two numbers are the same value (``12.5`` written, ``12.500000001`` computed)."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def to_float(text: str) -> float:
    """The value of a :data:`NUMBER` match (``nan`` for none): "1,000" is a thousand; "12,5"
    is 12.5 only when the comma is the one separator and not followed by three digits."""
    if text.count(",") == 1 and "." not in text and len(text.split(",")[1]) != 3:
        text = text.replace(",", ".")
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def digits_in(text: str) -> set[float]:
    """The numbers ``text`` writes in digits."""
    return {to_float(m.group()) for m in NUMBER.finditer(text)}
