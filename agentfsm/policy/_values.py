"""Where a call's values occur in the conversation (:mod:`agentfsm.policy.grounding`'s
reading of values): the numbers and strings a call carries (:func:`values_of`), and
whether the conversation has one (:class:`Source`: a number written in digits; a string,
one of its words, or a word it abbreviates). Number words are English and read only
where asked for (:func:`numbers_in`, :func:`number_spans`: the opt-in English policies).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agentfsm.core.numbers import NUMBER, digits_in, same, to_float

__all__ = ["STOP_WORDS", "WORD", "Source", "enum_params", "grounded", "number_spans", "numbers_in", "values_of"]

#: words that say nothing about a value (an answer's or a string argument's)
STOP_WORDS = frozenset(
    "a an the and or of to in on at by for with from as is are was were be been will would can could "
    "that this there these those what when where which who your you it its have has had not no".split()
)
WORD = re.compile(r"[^\W_]+")
_NUMBER_WORDS = {
    w: float(i)
    # "one" is left out: it is a determiner far more often ("one short sentence")
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
    if w != "one"
} | {"thirty": 30.0, "forty": 40.0, "fifty": 50.0, "sixty": 60.0, "seventy": 70.0, "eighty": 80.0,
     "ninety": 90.0, "hundred": 100.0, "thousand": 1000.0, "million": 1e6, "dozen": 12.0, "half": 0.5}


def enum_params(schema: Any) -> set[str]:
    """The top-level parameters of ``schema`` whose values are the schema's own (an enum or a const)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return set()
    return {n for n, s in props.items() if isinstance(s, dict) and ("enum" in s or "const" in s)}


def values_of(arguments: Any, skip: frozenset[str] | set[str] = frozenset()) -> Iterator[float | str]:
    """The numbers and strings in ``arguments`` (top-level names in ``skip`` left out)."""
    if isinstance(arguments, dict):
        for name, value in arguments.items():
            if name not in skip:
                yield from values_of(value)
    elif isinstance(arguments, list):
        for item in arguments:
            yield from values_of(item)
    elif isinstance(arguments, bool) or arguments is None:
        return
    elif isinstance(arguments, int | float):
        yield float(arguments)
    elif isinstance(arguments, str):
        yield arguments.strip().lower()  # an empty string is a value no conversation grounds


class Source:
    """The conversation's numbers and words, read once."""

    def __init__(self, text: str, number_words: bool = False) -> None:
        self.text = text.lower()
        self.words = set(WORD.findall(self.text))
        self._squeezed: str | None = None
        self.numbers = digits_in(self.text)
        # number words are English: only the opt-in English policies read them
        if number_words:
            self.numbers |= {v for w, v in _NUMBER_WORDS.items() if w in self.words}

    @property
    def squeezed(self) -> str:
        """The text's letters and digits only ("Example_City" is "example city")."""
        if self._squeezed is None:
            self._squeezed = "".join(WORD.findall(self.text))
        return self._squeezed

    def has(self, value: float | str) -> bool:
        if isinstance(value, float):
            return any(same(value, n) for n in self.numbers)
        if not value:
            return False
        if value in self.text:
            return True
        words = [w for w in WORD.findall(value) if len(w) >= 2]
        if words and "".join(words) in self.squeezed:
            return True
        # most of its words, not one "the": a value trailing off into prose is not grounded
        content = [w for w in words if w not in STOP_WORDS] or words
        found = sum(w in self.words or (len(w) <= 4 and any(s.startswith(w) for s in self.words)) for w in content)
        return found > 0 and 2 * found >= len(content)


def number_spans(value: float, text: str) -> list[tuple[int, int]]:
    """Where ``text`` (lowercase) writes the number ``value``, in digits or as a number word."""
    spans = [(m.start(), m.end()) for m in NUMBER.finditer(text) if same(to_float(m.group()), value)]
    spans += [(m.start(), m.end()) for m in WORD.finditer(text) if _NUMBER_WORDS.get(m.group()) == value]
    return sorted(spans)


def numbers_in(text: str) -> set[float]:
    """The numbers ``text`` holds, written in digits or as (English) number words."""
    return set(Source(text, number_words=True).numbers)


def grounded(value: float | str, conversation: str) -> bool:
    """Whether ``value`` occurs in ``conversation`` (see the module's rules)."""
    return Source(conversation).has(value)
