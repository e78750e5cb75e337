"""Does a final answer carry text that the runtime wrote? A language-neutral detector.

The runtime writes text of its own into a run: the contract (system prompt), every
correction message it sends, and the framing around tool results ("The result of X
(call c0) is ...", "The user asked: ..."). None of it may reach the user. An answer
*carries runtime text* when it copies a run of at least :data:`MIN_WORDS` consecutive
words (or :data:`MIN_CHARS` characters) from that text, of which at least
:data:`MIN_OWN_WORDS` words (or half of :data:`MIN_CHARS` characters) are the runtime's
own: words that appear nowhere in the user's request, the tools' names and descriptions
or the tool results. So an answer that restates a result in the runtime's order ("Paris
is sunny, 18 °C. The ...", copied from "(city='Paris') is sunny, 18 °C.\nThe result"),
or repeats the user's question, is not flagged; "The result of get_capital is Nairobi"
and "The user asked: <question>" are.

Words are compared folded (case and accents ignored), whatever the language; the texts
come from the run's own events (:class:`RunTexts` is an ``on_event`` hook), so the
detector needs no list of phrases and follows the runtime's wording as it changes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentfsm.core.events import (
    FinalEvent,
    ModelRequestEvent,
    RequestEvent,
    RetryEvent,
    ToolResultEvent,
    TranscriptEvent,
)
from agentfsm.core.messages import ToolMessage

__all__ = ["MIN_CHARS", "MIN_OWN_WORDS", "MIN_WORDS", "RunTexts", "find_runtime_text", "runtime_text_of"]

#: a copied run this many words long counts ...
MIN_WORDS = 6
#: ... or this many characters (long identifiers, scripts without spaces)
MIN_CHARS = 30
#: ... when at least this many of its words (or half as many characters as MIN_CHARS) are the runtime's own
MIN_OWN_WORDS = 2


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())


def _blob(texts: Iterable[str]) -> str:
    # one line per text: a run never spans two texts
    return "\n".join(" " + " ".join(_tokens(t)) + " " for t in texts)


def _in(run: Sequence[str], blob: str) -> bool:
    return (" " + " ".join(run) + " ") in blob


def _counts(run: Sequence[str], vocabulary: Collection[str]) -> bool:
    """Whether a copied run is long enough and enough of it is the runtime's own."""
    if len(run) < MIN_WORDS and len(" ".join(run)) < MIN_CHARS:
        return False
    own = [w for w in run if w not in vocabulary]
    return len(own) >= MIN_OWN_WORDS or len(" ".join(own)) >= MIN_CHARS // 2


def find_runtime_text(answer: str, runtime: Sequence[str], allowed: Sequence[str]) -> str | None:
    """The stretch of ``answer`` copied from the ``runtime`` texts (see the module docstring),
    or ``None``. ``allowed``: the user's request, the tools' descriptions, the tool results."""
    words = _tokens(answer)
    runtime_blob = _blob(runtime)
    vocabulary = {w for text in allowed for w in _tokens(text)}
    for i in range(len(words)):
        j = i + 1
        while j <= len(words) and _in(words[i:j], runtime_blob):
            j += 1
        run = words[i : j - 1]
        if run and _counts(run, vocabulary):
            return " ".join(run)
    return None


@dataclass
class RunTexts:
    """An ``on_event`` hook that keeps what :func:`find_runtime_text` needs from one run:
    the runtime's texts, the user's and the tools' texts, and the final answer."""

    #: the runtime's texts, each once, in first-seen order
    runtime: dict[str, None] = field(default_factory=dict)
    allowed: list[str] = field(default_factory=list)
    answer: str = ""
    #: model calls made (every completion: candidates and extensions included)
    model_calls: int = 0

    def __call__(self, event: TranscriptEvent) -> None:
        match event:
            case RequestEvent():
                for message in event.messages:
                    content = getattr(message, "content", None)  # a tool message has a result instead
                    if isinstance(content, str):
                        self.allowed.append(content)
                    elif isinstance(message, ToolMessage):
                        self.allowed.append(message.result.content)
                self.allowed += [_tool_text(t.name, t.description, t.parameters) for t in event.tools]
            case ModelRequestEvent():
                self.model_calls += 1
                for m in event.messages:
                    if m.role != "assistant" and m.content not in self.allowed:
                        self.runtime[m.content] = None
            case RetryEvent():
                self.runtime[event.message] = None
            case ToolResultEvent():
                self.allowed.append(event.result.content)
            case FinalEvent():
                self.answer = event.content
            case _:
                pass

    def finding(self, answer: str | None = None) -> str | None:
        """The runtime text in ``answer`` (default: the run's final answer), or ``None``."""
        return find_runtime_text(self.answer if answer is None else answer, list(self.runtime), self.allowed)


def _tool_text(name: str, description: str, parameters: Any) -> str:
    parts = [name, description]
    props = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    for key, spec in props.items():
        parts.append(str(key))
        if isinstance(spec, dict) and isinstance(spec.get("description"), str):
            parts.append(spec["description"])
    return "\n".join(parts)


def runtime_text_of(events: Iterable[TranscriptEvent]) -> str | None:
    """The runtime text in a recorded run's final answer (from its transcript events), or ``None``."""
    texts = RunTexts()
    for event in events:
        texts(event)
    return texts.finding()
