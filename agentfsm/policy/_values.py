"""Where a call's values occur in the conversation (:mod:`agentfsm.policy.grounding`'s
reading of values): the numbers and strings a call carries (:func:`values_of`), and
whether the conversation has one (:class:`Source`: a number written in digits, in any
script; a string, one of its words, a word it abbreviates, or a word it inflects at its
end, compared folded in every script: :mod:`agentfsm.core.words`). Number words are
English and read only where asked for (:func:`numbers_in`, :func:`number_spans`: the
opt-in English policies).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from agentfsm.core.numbers import NUMBER, digits_in, same, to_float
from agentfsm.core.words import fold, words

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
        #: the text folded (:func:`~agentfsm.core.words.fold`), and its words
        self.text = fold(text)
        self.words = set(words(self.text))
        self._squeezed: str | None = None
        # read before folding, which turns a no-break space between thousands into a space
        self.numbers = digits_in(text)
        # number words are English: only the opt-in English policies read them
        if number_words:
            self.numbers |= {v for w, v in _NUMBER_WORDS.items() if w in self.words}

    @property
    def squeezed(self) -> str:
        """The text's letters and digits only ("Example_City" is "example city")."""
        if self._squeezed is None:
            self._squeezed = "".join(words(self.text))
        return self._squeezed

    def has(self, value: float | str) -> bool:
        if isinstance(value, float):
            return any(same(value, n) for n in self.numbers)
        value = fold(value).strip()
        if not value:
            return False
        if value in self.text:
            return True
        said = [w for w in words(value) if len(w) >= 2]
        if said and "".join(said) in self.squeezed:
            return True
        # most of its words, not one "the": a value trailing off into prose is not grounded
        content = [w for w in said if w not in STOP_WORDS] or said
        found = sum(w in self.words or self._stem(w) for w in content)
        return found > 0 and 2 * found >= len(content)

    def _stem(self, word: str) -> bool:
        """Whether a word of the text starts with ``word`` (an abbreviation: "mi" for
        "miles"), or with all of ``word`` but its last letter, where ``word`` is 5 letters or
        more (a word inflected at its end: "Москва" for "в Москве", "Warszawa" for "w Warszawie")."""
        if len(word) <= 4:
            return any(s.startswith(word) for s in self.words)
        stem = word[:-1]
        return any(s.startswith(stem) and len(s) - len(stem) <= 3 for s in self.words)


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
