"""Numbers written in digits: read the same way in every language and script.

What the language-neutral value checks compare (a call's numbers against the
conversation's): ``12.5``, ``12,5`` (one comma as the decimal mark), ``1,000`` and
``1.000.000`` (thousands), ``1.234,5`` and ``1,234.5`` (the last mark is the decimal one),
``-3``, ``1e-9``. Any script's decimal digits count (``١٢``, ``१२``, full-width ``１２``:
:func:`unicodedata.decimal`), as do the marks written between them beside ``.`` and ``,``:
the Arabic decimal and thousands separators (``١٢٫٥``, ``١٬٠٠٠``), full-width stops and
commas (``１２．５``), the minus sign U+2212 (``−3``), and the marks that only ever group
thousands (no-break, narrow no-break and thin spaces, apostrophes: ``1 234,5``,
``1'234.5``), after which the one ``.`` or ``,`` left is the decimal mark. Number words
are not read here: they are per language, and only an opt-in language policy reads them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["NUMBER", "Decimal", "as_ascii", "decimals_in", "digits_in", "same", "to_float"]

#: the signs a negative number opens with: the hyphen-minus, the minus sign, its full-width form
_MINUS = "-\u2212\uff0d"
#: the marks that read as ``.`` and ``,`` (Arabic decimal and thousands separators, full-width stop and comma)
_MARKS = {"\u066b": ".", "\u066c": ",", "\uff0e": ".", "\uff0c": ","}
#: the marks that only ever group thousands: an apostrophe, a right single quote, no-break,
#: narrow no-break and thin spaces
_GROUPS = "'\u2019\u00a0\u202f\u2009"
_MARK = re.escape(".," + "".join(_MARKS))
_GROUP = re.escape(_GROUPS)

#: a number written in digits (any script's), with its separators, and an exponent ("1e-9")
NUMBER = re.compile(
    rf"[{re.escape(_MINUS)}]?\d+(?:[{_MARK}]\d+|[{_GROUP}]\d{{3}}(?!\d))*(?:[eE][-+]?\d{{1,4}}(?![\w.]))?"
)
_PLAIN = str.maketrans({**_MARKS, **{m: "-" for m in _MINUS}, **{g: None for g in _GROUPS}})


def same(a: float, b: float) -> bool:
    """Whether two numbers are the same value (``12.5`` written, ``12.500000001`` computed)."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _plain(text: str) -> tuple[str, bool]:
    """A :data:`NUMBER` match in ASCII (digits, ``-``, ``.`` and ``,``), the marks that only
    group thousands left out; and whether there was one."""
    digits = "".join(str(d) if (d := unicodedata.decimal(c, None)) is not None else c for c in text)
    plain = digits.translate(_PLAIN)
    return plain, any(g in text for g in _GROUPS)


def as_ascii(text: str) -> str:
    """A :data:`NUMBER` match in ASCII, as written otherwise: "١٢٫٥" is "12.5", "１２．５" is
    "12.5", "−3" is "-3", "1 234,5" (a no-break space) is "1234,5"."""
    return _plain(text)[0]


def to_float(text: str) -> float:
    """The value of a :data:`NUMBER` match (``nan`` for none): "1,000" is a thousand; "12,5"
    is 12.5 when the comma is the one mark and not followed by three digits, or when the
    thousands are grouped otherwise ("1 234,5"); of a "." and a "," the last is the decimal mark."""
    plain, grouped = _plain(text)
    mantissa, e, power = plain.lower().partition("e")
    if e:
        return to_float(mantissa) * 10.0 ** int(power) if abs(int(power)) <= 308 else float("nan")
    marks = [c for c in plain if c in ".,"]
    if marks:
        last = marks[-1]
        if len(set(marks)) == 2 and marks.count(last) == 1:  # "1.234,5", "1,234.5"
            plain = plain.replace("." if last == "," else ",", "").replace(",", ".")
        elif len(marks) == 1 and last == "," and (grouped or len(plain.split(",")[1]) != 3):
            plain = plain.replace(",", ".")  # "12,5", "1 234,567"
        elif len(marks) > 1 and all(len(p) == 3 for p in re.split(r"[.,]", plain)[1:]):
            plain = plain.replace(last, "")  # "1.000.000", "2,250,000"
    try:
        return float(plain.replace(",", ""))
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
        plain, _ = _plain(written)
        if "e" in plain.lower():
            continue  # an exponent: not misread by its parts
        parts = re.split(r"[.,]", plain.lstrip("-"))
        if len(parts) < 2:
            continue
        thousands = "." not in plain and all(len(p) == 3 for p in parts[1:])
        if not thousands and (len(parts) > 2 or len(parts[1]) == 3):
            continue  # "1.000.000", "200.000": thousands or a decimal, by language
        sign = -1.0 if plain.startswith("-") else 1.0
        yield Decimal(written, to_float(written), sign * float(parts[0]), sign * float(parts[1]),
                      sign * float(parts[0] + parts[1]), "," in plain, thousands, parts[1].startswith("0"))
