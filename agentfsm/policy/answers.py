"""Final answers: a reply that loops is cut where the loop starts; short tool results
are framed as sentences ("The result of NAME is VALUE."), which a small model
restates in its answer where it would copy another number from a bare value.

Greedy decoding on a small model often ends an answer by repeating a sentence until the
token limit ("The capital of Japan is Tokyo. The capital of Japan is Tokyo. The capi").
When everything from some sentence on only repeats sentences already written (the last
one possibly cut off), the answer ends before that point (a sentence ends at a full stop,
question or exclamation mark of any script: "。", "؟", "।"). An answer that says a thing
twice and then goes on is left as it is. A loop inside a sentence ("No, no, no, no, ...",
"I'm sorry, I'm sorry, ...") is cut the same way when it runs to the end of the answer,
repeats one stretch (:func:`agentfsm.core.loops.tail_loops`: up to 40 characters, at
least 5 times over at least 30, case set aside), and the stretch holds a letter: the
answer keeps the stretch once. Digits repeated ("1.10000000000001",
"5,000,000,000,...") are left as written: cutting them would write another number. But
an answer cut off (by the token limit or the loop stop) inside such a number ("... is
31.07. The result of convert_km_to_miles is 50.000000000000011111111...") never finished
it: that last sentence goes, where a whole sentence stands before it. These cuts compare
characters only, so they read no language. Pure: the same text always gives the same
cut, so replay decides the same way.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from functools import cache

from agentfsm.core.loops import tail_loops
from agentfsm.core.messages import Message, ToolMessage, ToolResult, UserMessage
from agentfsm.policy.base import Policy

__all__ = ["POLICY", "AnswersPolicy", "latest_results", "trim_repetition"]

#: the names of the marks that end a sentence in any script: 。 ！ ？ ؟ ۔ । ॥ ։ ። ...
#: (Unicode has a Sentence_Terminal property; :mod:`unicodedata` does not expose it)
_TERMINAL = re.compile(r"\b(?:FULL STOP|QUESTION MARK|EXCLAMATION MARK|DANDA)\b")


@cache
def _break() -> re.Pattern[str]:
    """Where a sentence ends: at . ! ? followed by white space (not inside "50.0"), at
    another script's full stop, question or exclamation mark with or without white space
    after it (Chinese and Japanese write none), but for one between digits ("１２．５"), or
    at a newline. Built on first use: the marks are read from the Unicode database."""
    marks = "".join(
        c for c in map(chr, range(0x80, 0x20000))
        if unicodedata.category(c) == "Po" and _TERMINAL.search(name := unicodedata.name(c, "")) and "INVERTED" not in name
    )
    return re.compile(rf"((?<=[.!?])\s+|(?<=[{re.escape(marks)}])(?!\d)\s*|\n+)")


def _key(sentence: str) -> str:
    return " ".join(sentence.split()).lower()


#: what a cut leaves at the end of a stretch: its separators, not its full stop
_TRAILING = " \t\n,;:-\u2013\u2014"


def _loop_start(text: str, letters: bool = True) -> tuple[int, int] | None:
    """Where the loop that ``text`` ends in starts, and its stretch's length, for the
    longest loop whose stretch holds a letter (``letters``), or holds none (see the
    module)."""
    found = [(start, period) for start, period in tail_loops(text)
             if any(c.isalpha() for c in text[start : start + period]) == letters]
    return min(found, default=None)


def _trim_loop(text: str) -> str:
    found = _loop_start(text)
    if found is None:
        return text
    start, period = found
    # the first copy kept whole, ending where a word or number ends: the loop may start
    # inside one ("10.5°F, 2.5°C, 1.5°F, 2.5°C, 1.5°F, ..." repeats from ".5°F")
    cut = next((c for c in range(start + period, min(start + 2 * period, len(text))) if _ends_word(text, c)),
               start + period)
    if text[cut - 1].isdigit() and text[cut].isdigit():
        return text  # no such end, and inside a number: a cut there would write another one
    return text[:cut].rstrip(_TRAILING)


def _ends_word(text: str, cut: int) -> bool:
    return text[cut].isspace() or text[cut - 1] in _TRAILING


def trim_repetition(text: str, cut: bool = False) -> str:
    """``text`` without a trailing loop of repeated sentences, or of a stretch inside one;
    ``cut`` (the reply was cut off): nor with a last sentence left in a loop of digits
    (see the module)."""
    trimmed = _trim_loop(_trim_sentences(text))
    return _drop_unfinished_number(trimmed) if cut else trimmed


def _drop_unfinished_number(text: str) -> str:
    """``text`` up to its last sentence break before the loop it ends in, when that loop
    holds no letter (a number still being written when the reply was cut) and a sentence
    stands before it; else ``text``."""
    found = _loop_start(text, letters=False)
    if found is None:
        return text
    breaks = [m.start() for m in _break().finditer(text, 0, found[0])]
    kept = text[: breaks[-1]].rstrip() if breaks else ""
    return kept or text


def _trim_sentences(text: str) -> str:
    """``text`` up to the first sentence already written from which every sentence only
    repeats one written before it, or begins one (the last, cut off); else ``text``.

    In time about linear in the sentences (a long answer that repeats a block and goes on
    was cubic, looking at every later sentence from each repeated one): each distinct
    sentence is known by the first sentence it begins (:func:`_first_begun`), and a cut
    at ``i`` holds when every sentence from ``i`` on begins one before ``i``."""
    pieces = _break().split(text)  # sentence, break, sentence, break, ...
    keys = [_key(s) for s in pieces[::2]]
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key:
            first.setdefault(key, i)
    begun = _first_begun(first)
    cut, latest = None, -1  # latest: the last of the sentences the ones from i on begin
    for i in range(len(keys) - 1, -1, -1):
        key = keys[i]
        if key:
            latest = max(latest, begun[key])
            if first[key] < i and latest < i:
                cut = i
    return text if cut is None else "".join(pieces[: 2 * cut]).rstrip()


def _first_begun(first: dict[str, int]) -> dict[str, int]:
    """For each sentence (by its first place, ``first``), the first place of a sentence
    that begins with it (itself, or a longer one written before it)."""
    ordered = sorted(first)  # the sentences that begin with a key follow it here
    begun: dict[str, int] = {}
    for key, at in first.items():
        j = bisect.bisect_left(ordered, key)
        while j < len(ordered) and ordered[j].startswith(key):
            at = min(at, first[ordered[j]])
            j += 1
        begun[key] = at
    return begun


def latest_results(history: Sequence[Message]) -> list[ToolResult]:
    """The latest round's tool results, oldest first (corrections after them skipped);
    empty when the latest user turn has none after it."""
    results: list[ToolResult] = []
    for msg in reversed(history):
        if isinstance(msg, ToolMessage):
            results.append(msg.result)
        elif results or (isinstance(msg, UserMessage) and msg.correction is None):
            break
    results.reverse()
    return results


class AnswersPolicy(Policy):
    """An answer that loops is cut where the loop starts; short results reach the model
    as sentences it can restate in its answer."""

    name = "answers"
    result_sentences = True

    def finish_answer(self, content: str, cut: bool = False) -> str:
        return trim_repetition(content, cut)


POLICY = AnswersPolicy()
