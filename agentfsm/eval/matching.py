"""Language-neutral checks of a task's calls and answer.

Nothing here reads a word of any language. Expected calls are compared on values: a
number numerically (a numeric string counts, with ``.`` or ``,`` as the decimal mark),
a string case-, accent- and punctuation-insensitively (:func:`fold`), against a list of
accepted values where a place has local names (:class:`OneOf`: "Allemagne" or
"Germany"), or :data:`ANY` non-empty value where the words are the model's to choose
(an email's subject). An answer is checked for the results it must state: numbers
(read with either decimal mark, within rounding) and verbatim result strings (as whole
words, folded).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ANY",
    "Call",
    "OneOf",
    "Value",
    "answer_matches",
    "call",
    "calls_match",
    "commuting",
    "fold",
    "numbers_in",
    "value_matches",
    "words",
]


def _plain(text: str) -> str:
    """NFKD, combining marks dropped, casefolded: "Pérou" -> "perou"."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def fold(text: str) -> str:
    """A comparison key: no case, accents, spaces or punctuation ("US-Dollar" == "us dollar").
    A value of symbols only ("$", "€") is kept as written, trimmed."""
    key = "".join(c for c in _plain(text) if c.isalnum())
    return key or " ".join(text.split()).casefold()


def words(text: str) -> list[str]:
    """The text's words and digit runs, folded ("14:30 Uhr" -> ``["14", "30", "uhr"]``)."""
    return re.findall(r"[^\W_]+", _plain(text))


class _Anything:
    """Any value that is present and not blank."""

    def __repr__(self) -> str:
        return "ANY"


#: an argument that must be present and non-empty, with any value
ANY: Final = _Anything()


@dataclass(frozen=True, init=False)
class OneOf:
    """A string value given in any of several accepted forms (compared folded)."""

    values: tuple[str, ...]

    def __init__(self, *values: str) -> None:
        object.__setattr__(self, "values", values)


#: an expected argument value
Value = int | float | str | OneOf | _Anything


def _number(got: Any) -> float | None:
    if isinstance(got, bool):
        return None
    if isinstance(got, int | float):
        return float(got)
    if isinstance(got, str):  # "12.5", or "12,5" with a decimal comma
        text = got.strip().replace("−", "-")
        for reading in (text, text.replace(",", ".") if "." not in text else text):
            try:
                return float(reading)
            except ValueError:
                continue
    return None


def value_matches(expected: Value, got: Any) -> bool:
    """Whether one argument value is the expected one (see the module docstring)."""
    if isinstance(expected, _Anything):
        return got is not None and (not isinstance(got, str) or bool(got.strip()))
    if isinstance(expected, bool):
        return got is expected
    if isinstance(expected, int | float):
        number = _number(got)
        return number is not None and math.isclose(number, float(expected), rel_tol=1e-9, abs_tol=1e-6)
    accepted = expected.values if isinstance(expected, OneOf) else (expected,)
    return isinstance(got, str) and fold(got) in {fold(v) for v in accepted}


@dataclass(frozen=True)
class Call:
    """An expected call: a tool name and the argument sets accepted (more than one where
    the order of arguments does not matter, as in ``add``)."""

    name: str
    args: tuple[Mapping[str, Value], ...]

    def accepts(self, name: str, args: Mapping[str, Any]) -> bool:
        """Whether a call made is this one: same name, the same argument names, every value matching."""
        return name == self.name and any(
            set(args) == set(want) and all(value_matches(v, args[k]) for k, v in want.items()) for want in self.args
        )


def call(name: str, **args: Value) -> Call:
    """An expected call with one accepted argument set."""
    return Call(name, (args,))


def commuting(name: str, a: Value, b: Value) -> Call:
    """An expected ``name(a, b)`` whose two arguments may come in either order."""
    return Call(name, ({"a": a, "b": b}, {"a": b, "b": a}))


def calls_match(expected: Sequence[Call], made: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
    """Whether ``made`` is exactly ``expected``, in any order, each expected call matched once."""
    if len(made) != len(expected):
        return False

    def assign(i: int, free: frozenset[int]) -> bool:
        if i == len(expected):
            return True
        return any(expected[i].accepts(*made[j]) and assign(i + 1, free - {j}) for j in sorted(free))

    return assign(0, frozenset(range(len(made))))


# a number as written: digits with "." or "," inside; a sign only where no word or digit precedes it
_NUMBER = re.compile(r"(?<![\w.,])[-−]?\d(?:[\d.,]*\d)?")


def numbers_in(text: str) -> list[float]:
    """Every reading of every number in ``text``: "12,5" is 12.5 or 125, "1,234.5" is 1234.5."""
    out: list[float] = []
    for match in _NUMBER.finditer(text):
        token = match.group().replace("−", "-")
        if "," in token and "." in token:  # both marks: the last one is the decimal mark
            comma_decimal = token.rfind(",") > token.rfind(".")
            readings = [token.replace(".", "").replace(",", ".") if comma_decimal else token.replace(",", "")]
        else:  # one mark: a decimal mark or a thousands separator
            readings = [token.replace(",", "."), token.replace(",", "").replace(".", "")]
        for reading in readings:
            try:
                out.append(float(reading))
            except ValueError:  # "1.2.3": not a number in either reading
                continue
    return out


def _has_number(found: Sequence[float], value: float) -> bool:
    return any(abs(n - value) <= max(0.01, 0.005 * abs(value)) for n in found)


def _has_words(answer_words: Sequence[str], value: str) -> bool:
    want = words(value)
    n = len(want)
    return n > 0 and any(list(answer_words[i : i + n]) == want for i in range(len(answer_words) - n + 1))


def answer_matches(answer: str, expected: Sequence[float | OneOf]) -> bool:
    """Whether ``answer`` is non-blank and states every expected result: a number (either
    decimal mark, within rounding), or one of a :class:`OneOf`'s strings as whole words."""
    if not answer.strip():
        return False
    found = numbers_in(answer)
    answer_words = words(answer)
    for item in expected:
        if isinstance(item, OneOf):
            if not any(_has_words(answer_words, v) for v in item.values):
                return False
        elif not _has_number(found, float(item)):
            return False
    return True
