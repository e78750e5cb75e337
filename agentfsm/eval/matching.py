"""Language-neutral checks of a task's calls and answer.

Nothing here reads a word of any language. Expected calls are compared on values: a
number numerically (a numeric string counts, with ``.`` or ``,`` as the decimal mark, in
any script's digits),
a string case-, accent- and punctuation-insensitively (:func:`fold`: the runtime's
:func:`agentfsm.core.words.fold`, its letters and digits only), against a list of
accepted values where a place has local names (:class:`OneOf`: "Allemagne" or
"Germany"), or :data:`ANY` non-empty value where the words are the model's to choose
(an email's subject). An answer is checked for the results it must state: numbers
(read with either decimal mark, in any script's digits, within rounding) and verbatim
result strings (as whole words, folded; in a script of wide characters, which runs words
together, anywhere).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentfsm.core.numbers import NUMBER, as_ascii, to_float
from agentfsm.core import words as _words
from agentfsm.core.words import runs_together, wide

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


def fold(text: str) -> str:
    """A comparison key: the text folded as the runtime compares values (no case nor
    accents), its letters and digits only ("US-Dollar" == "us dollar"). A value of symbols
    only ("$", "€") is kept as written, trimmed."""
    key = "".join(c for c in _words.fold(text) if c.isalnum())
    return key or " ".join(text.split()).casefold()


def words(text: str) -> list[str]:
    """The text's words and digit runs, folded as the runtime reads them, in any script
    ("14:30 Uhr" -> ``["14", "30", "uhr"]``; a Devanagari or Thai vowel sign stays in its word)."""
    return _words.words(_words.fold(text))


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
    if isinstance(got, str):  # "12.5", or "12,5" with a decimal comma, in any script's digits
        text = as_ascii(got.strip())
        for reading in (text, text.replace(",", ".") if "." not in text else text):
            try:
                return float(reading)
            except ValueError:
                continue
        if NUMBER.fullmatch(got.strip()):  # "1.234,5", "1 234,5": the thousands read too
            return to_float(got.strip())
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


def _glued(text: str, at: int) -> bool:
    """Whether the number found at ``at`` runs on from a word or number before it ("MP3",
    "1.2.3"): a letter of a script that writes its words with spaces, a digit, a mark.
    A wide character (CJK, kana, Hangul) does not glue: "結果は50" writes 50."""
    before = text[at - 1] if at else " "
    return before in ".," or (before.isalnum() or before == "_") and wide(before) == 1


def numbers_in(text: str) -> list[float]:
    """Every reading of every number in ``text`` (digits of any script, the marks
    :mod:`agentfsm.core.numbers` reads): "12,5" is 12.5 or 125, "1,234.5" is 1234.5; a
    sign only where no word or digit precedes it."""
    out: list[float] = []
    for match in NUMBER.finditer(text):
        written, at = match.group(), match.start()
        if _glued(text, at):
            if written[0].isdigit() or _glued(text, at + 1):
                continue
            written = written[1:]  # "2023-03": the hyphen joins, the 03 is a number
        token = as_ascii(written)
        if "," in token and "." in token:  # both marks: the last one is the decimal mark
            comma_decimal = token.rfind(",") > token.rfind(".")
            readings = [token.replace(".", "").replace(",", ".") if comma_decimal else token.replace(",", "")]
        elif len(token) < len(written):  # thousands grouped by a space or an apostrophe: one reading
            readings = [str(to_float(written))]
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
    """Whether ``answer_words`` hold ``value`` as whole words; a value in a script that runs
    words and particles together (CJK, kana, Hangul, Thai ...) anywhere in them ("東京は晴れ"
    states "晴れ", "서울은" states "서울")."""
    want = words(value)
    n = len(want)
    if n and runs_together(value):
        return " ".join(want) in " ".join(answer_words)
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
