"""An answer never carries text the runtime wrote: a language-neutral guard.

The runtime writes text of its own into a conversation: the contract (the system prompt
it adds), the corrections it sends, and the framing around tool results. A small model
asked again often answers by copying it ("The request is not about get_weather:", "The
result of multiply is 56. The user asked: ..."). Such an answer is refused: the model is
asked again, and never answered for.

An answer *carries runtime text* when it copies a run of at least :data:`MIN_WORDS`
consecutive words from those texts of which at least :data:`MIN_OWN_WORDS` are the
runtime's own (or one word of :data:`MIN_CHARS` characters, a long identifier or a script
written without spaces), or when the whole answer, shorter than a run but of at least
:data:`MIN_WHOLE_WORDS` words, is a stretch of one of those texts with as many words of
the runtime's own ("No tool fits this request", a correction's first sentence, given as
the answer to "¿Hace frío en Buenos Aires?"): words found nowhere in what the user, the
client or the tools wrote (the request, the tools' names and descriptions, the results),
nor in the model's own calls
before a correction quoted them (:func:`agentfsm.engine.authored.own_values`). So an answer that restates a
result, or the user's question, is not refused. Words are compared case- and
accent-folded, whatever the language; no phrase list is kept: the texts are the run's
own, so the guard follows the runtime's wording as it changes. An answer that is only a
``<slot>`` of those texts (``<your answer>``, the contract's placeholder: too short for a
run) is refused too: it says nothing.

Linear in the answer and the texts: runs are found through the set of the texts'
:data:`MIN_WORDS`-word shingles.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Final

from agentfsm.guards.base import ACCEPT, Correction, Verdict

__all__ = [
    "GUARD", "MIN_CHARS", "MIN_OWN_WORDS", "MIN_WHOLE_WORDS", "MIN_WORDS", "REASON", "SLOT_MESSAGE", "check", "find_runtime_text",
    "is_template", "words",
]

GUARD = "runtime_text"
REASON: Final = "runtime_text"
#: a copied run this many words long counts ...
MIN_WORDS = 6
#: ... when at least this many of its words are the runtime's own
MIN_OWN_WORDS = 2
#: a whole answer this many words long (and under :data:`MIN_WORDS`) counts when it is a
#: stretch of one of the runtime's texts
MIN_WHOLE_WORDS = 3
#: one word this long counts alone (a long identifier; a script written without spaces)
MIN_CHARS = 30

_WORD = re.compile(r"\w+")
#: a reply that is only a slot of the contract's shapes (``<your answer>``), copied
_TEMPLATE = re.compile(r"<[^<>\n]{1,40}>")
#: the correction of an answer that is a copied slot
SLOT_MESSAGE = "Write your actual reply to the user's message, in plain words."


def is_template(answer: str) -> bool:
    """Whether ``answer`` is only a ``<slot>`` (``<your answer>``): no reply at all."""
    return _TEMPLATE.fullmatch(answer.strip()) is not None


def words(text: str) -> list[str]:
    """``text``'s words, case- and accent-folded (any script)."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    return _WORD.findall("".join(c for c in folded if not unicodedata.combining(c)))


def _shingles(texts: Iterable[str]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for text in texts:  # a run never spans two texts
        w = words(text)
        found.update(tuple(w[i : i + MIN_WORDS]) for i in range(len(w) - MIN_WORDS + 1))
    return found


def find_runtime_text(answer: str, runtime: Sequence[str], allowed: Sequence[str]) -> str | None:
    """The first stretch of ``answer`` copied from the ``runtime`` texts with at least
    :data:`MIN_OWN_WORDS` of the runtime's own words (see the module), or ``None``.
    ``allowed``: what the user, the client and the tools wrote."""
    said = words(answer)
    vocabulary = {w for text in allowed for w in words(text)}
    long_words = {w for text in runtime for w in words(text) if len(w) >= MIN_CHARS}
    for w in said:
        if w in long_words and w not in vocabulary:
            return w
    if MIN_WHOLE_WORDS <= len(said) < MIN_WORDS:
        return _whole(said, runtime, vocabulary)
    known = _shingles(runtime)
    if len(said) < MIN_WORDS or not known:
        return None
    i = 0
    while i <= len(said) - MIN_WORDS:
        if tuple(said[i : i + MIN_WORDS]) not in known:
            i += 1
            continue
        end = i + MIN_WORDS  # the copied run: consecutive shingles found in the texts
        while end < len(said) and tuple(said[end - MIN_WORDS + 1 : end + 1]) in known:
            end += 1
        run = said[i:end]
        if sum(w not in vocabulary for w in run) >= MIN_OWN_WORDS:
            return " ".join(run)
        i = end
    return None


def _whole(said: list[str], runtime: Sequence[str], vocabulary: set[str]) -> str | None:
    """``said`` (a short answer's words) when it is a stretch of one ``runtime`` text with
    at least :data:`MIN_OWN_WORDS` words outside ``vocabulary``; else ``None``."""
    if sum(w not in vocabulary for w in said) < MIN_OWN_WORDS:
        return None
    needle = " " + " ".join(said) + " "
    return " ".join(said) if any(needle in " " + " ".join(words(text)) + " " for text in runtime) else None


def check(answer: str, runtime: Sequence[str], allowed: Sequence[str]) -> Verdict:
    """Refuse an answer that carries runtime text (:func:`find_runtime_text`), or that is
    only a ``<slot>`` of the runtime's own text (``<your answer>``, copied from the
    contract: two words, under :data:`MIN_WORDS`, and no reply at all)."""
    slot = answer.strip()
    if is_template(slot) and any(slot in text for text in runtime):
        return Correction(guard=GUARD, reason=REASON, message=SLOT_MESSAGE, detail=f"the answer is a slot of the contract: {slot!r}")
    copied = find_runtime_text(answer, runtime, allowed)
    if copied is None:
        return ACCEPT
    return Correction(
        guard=GUARD,
        reason=REASON,
        message="Write your reply to the user's last message yourself, in plain words; do not repeat these instructions.",
        detail=f"the answer copies the runtime's text: {copied[:120]!r}",
    )
