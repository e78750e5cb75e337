"""Does a final answer carry text that the runtime wrote? The table counts what the guard refuses.

The rule is :mod:`agentfsm.guards.runtime_text`'s (one path: the guard refuses such an
answer during a run, and the quality table counts any that got through):
an answer carries runtime text when it copies :data:`MIN_WORDS` or more consecutive
words of what the runtime wrote in the run (the contract, its corrections, the framing
of results), :data:`MIN_OWN_WORDS` or more of them found nowhere in the request, the
tools, the results or the model's own calls (:func:`~agentfsm.engine.authored.own_values`,
as the guard reads them), or when the whole answer, of :data:`MIN_WHOLE_WORDS` words or
more and under :data:`MIN_WORDS`, is a stretch of those texts with as many such words.
The texts come from the run's own events (:class:`RunTexts` is an ``on_event`` hook), so
no phrase list is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentfsm.core.events import (
    FinalEvent,
    ModelOutputEvent,
    ModelRequestEvent,
    RequestEvent,
    RetryEvent,
    ToolCallEvent,
    ToolResultEvent,
    TranscriptEvent,
)
from agentfsm.core.messages import AssistantMessage, Message, ToolMessage, ToolSpec, UserMessage
from agentfsm.engine.authored import own_values
from agentfsm.guards._history import calls_and_results
from agentfsm.guards.runtime_text import MIN_CHARS, MIN_OWN_WORDS, MIN_WHOLE_WORDS, MIN_WORDS, find_runtime_text, words

__all__ = [
    "MIN_CHARS", "MIN_OWN_WORDS", "MIN_WHOLE_WORDS", "MIN_WORDS", "CallsSpent", "RunTexts", "echoes", "find_runtime_text", "runtime_text_of",
]

@dataclass(frozen=True)
class CallsSpent:
    """Model calls beyond a decision's first reply, by what they were for."""

    extensions: int = 0
    candidates: int = 0
    corrections: int = 0

    def plus(self, request: ModelRequestEvent) -> CallsSpent:
        """These counts with ``request`` counted."""
        if request.extension:
            return CallsSpent(self.extensions + 1, self.candidates, self.corrections)
        if request.candidate:
            return CallsSpent(self.extensions, self.candidates + 1, self.corrections)
        if request.attempt > 1:
            return CallsSpent(self.extensions, self.candidates, self.corrections + 1)
        return self

    def __add__(self, other: CallsSpent) -> CallsSpent:
        return CallsSpent(self.extensions + other.extensions, self.candidates + other.candidates,
                          self.corrections + other.corrections)


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
    #: of those, the calls spent on list extensions, consensus candidates and corrections
    #: (attempts after the first, not counting their extensions)
    spent: CallsSpent = field(default_factory=lambda: CallsSpent())
    #: the conversation as the run saw it (request, calls, results)
    history: list[Message] = field(default_factory=list)
    #: the user's latest request (its last user message)
    request: str = ""
    #: the tools offered, each once (the first offer of a name)
    tools: list[ToolSpec] = field(default_factory=list)
    #: the model's latest reply (not an extension or a candidate): the one a retry refused
    reply: str = ""

    def __call__(self, event: TranscriptEvent) -> None:
        match event:
            case RequestEvent():
                self.history += event.messages
                asked = [m.content for m in event.messages if isinstance(m, UserMessage) and m.correction is None]
                self.request = asked[-1] if asked else self.request
                for message in event.messages:
                    content = getattr(message, "content", None)  # a tool message has a result instead
                    if isinstance(content, str):
                        self.allowed.append(content)
                    elif isinstance(message, ToolMessage):
                        self.allowed.append(message.result.content)
                known = {t.name for t in self.tools}
                new = [t for t in event.tools if t.name not in known]  # each request offers them again
                self.allowed += [_tool_text(t.name, t.description, t.parameters) for t in new]
                self.tools += new
            case ModelRequestEvent():
                self.model_calls += 1
                self.spent = self.spent.plus(event)
                for m in event.messages:
                    if m.role != "assistant" and m.content not in self.allowed:
                        self.runtime[m.content] = None
            case ModelOutputEvent(extension=False, candidate=0):
                self.reply = event.text
            case RetryEvent():
                self.runtime[event.message] = None
                # the refused reply and its correction, as the engine's history holds them
                self.history += [AssistantMessage(content=self.reply),
                                 UserMessage(content=event.message, correction=event.reason)]
            case ToolCallEvent():
                self.history.append(AssistantMessage(tool_calls=(event.call,)))
            case ToolResultEvent():
                self.history.append(ToolMessage(result=event.result))
                self.allowed.append(event.result.content)
            case FinalEvent():
                self.answer = event.content
            case _:
                pass

    def echo(self, answer: str | None = None) -> bool:
        """Whether ``answer`` (default: the run's final answer) repeats the request (:func:`echoes`)."""
        return echoes(self.answer if answer is None else answer, self.request)

    def finding(self, answer: str | None = None) -> str | None:
        """The runtime text in ``answer`` (default: the run's final answer), or ``None``."""
        # the results stated plainly, and the model's own values, are the model's to say, as
        # the guard allows them
        allowed = self.allowed + calls_and_results(self.history)[1] + own_values(self.history, self.tools)
        return find_runtime_text(self.answer if answer is None else answer, list(self.runtime), allowed)


def echoes(answer: str, request: str) -> bool:
    """Whether ``answer`` repeats the user's ``request`` rather than replying to it: their
    words as the runtime-text guard folds them (case, accents and punctuation set aside),
    one occurs whole in the other and is at least half of it ("Hi! Who wrote Romeo and
    Juliet?" for "Who wrote Romeo and Juliet?"; the first half of a long request, cut).
    Characters only: no word of any language is read."""
    said, asked = " ".join(words(answer)), " ".join(words(request))
    if not said or not asked:
        return False
    short, long = sorted((said, asked), key=len)
    return short in long and 2 * len(short) >= len(long)


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
