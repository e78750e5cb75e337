"""Numbers written in digits: read the same way in every language.

What the language-neutral value checks compare (a call's numbers against the
conversation's): ``12.5``, ``12,5`` (one comma as the decimal mark), ``1,000`` and
``1.000.000`` (thousands), ``-3``, ``1e-9``. Number words are not read here: they are English, and
only an opt-in language policy reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["NUMBER", "Decimal", "decimals_in", "digits_in", "same", "to_float"]

#: a number written in digits, with its separators, and an exponent ("1e-9")
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*(?:[eE][-+]?\d{1,4}(?![\w.]))?")


def same(a: float, b: float) -> bool:
    """Whether two numbers are the same value (``12.5`` written, ``12.500000001`` computed)."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def to_float(text: str) -> float:
    """The value of a :data:`NUMBER` match (``nan`` for none): "1,000" is a thousand; "12,5"
    is 12.5 only when the comma is the one separator and not followed by three digits."""
    mantissa, e, power = text.lower().partition("e")
    if e:
        return to_float(mantissa) * 10.0 ** int(power) if abs(int(power)) <= 308 else float("nan")
    if text.count(",") == 1 and "." not in text and len(text.split(",")[1]) != 3:
        text = text.replace(",", ".")
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def digits_in(text: str) -> set[float]:
    """The numbers ``text`` writes in digits."""
    return {to_float(m.group()) for m in NUMBER.finditer(text)}


@dataclass(frozen=True, slots=True)
class Decimal:
    """A number written with a decimal mark (``12,5``, ``-3.75``) or with thousands
    separators (``200,000``), and what a misreading makes of it."""

    #: as written
    text: str
    value: float
    #: the part before the first mark and the part after it, signed as written (12 and 5;
    #: 200 and 0 for "200,000")
    whole: float
    after: float
    #: both parts run together (125)
    joined: float
    #: the mark is a comma, which also separates list items ("1,5 and 10 years")
    comma: bool
    #: the commas separate thousands
    thousands: bool = False
    #: the part after the mark starts with a zero ("12.05", "0.5" after "0."), so that
    #: part read alone (5) is a default as often as a misreading
    zero_after: bool = False


def decimals_in(text: str) -> Iterator[Decimal]:
    """The numbers ``text`` writes with a decimal mark or thousands commas."""
    for m in NUMBER.finditer(text):
        written = m.group()
        if "e" in written.lower():
            continue  # an exponent: not misread by its parts
        parts = re.split(r"[.,]", written.lstrip("-"))
        if len(parts) < 2:
            continue
        thousands = "." not in written and all(len(p) == 3 for p in parts[1:])
        if not thousands and (len(parts) > 2 or len(parts[1]) == 3):
            continue  # "1.000.000", "200.000": thousands or a decimal, by language
        sign = -1.0 if written.startswith("-") else 1.0
        yield Decimal(written, to_float(written), sign * float(parts[0]), sign * float(parts[1]),
                      sign * float(parts[0] + parts[1]), "," in written, thousands, parts[1].startswith("0"))
