"""A backend that answers from a script: for tests, ours and our users'.

::

    backend = ScriptedBackend(['```json action\\n{"tool": "add", "args": {"a": 1}}\\n```', "3"])
    agent = Agent(backend, tools=[add])
    ...
    assert backend.requests[0].messages[0].role == "system"

A script is a queue of replies (strings, :class:`~agentfsm.core.backend.Completion`
values, or exceptions to raise at that point) or a function of the conversation.

Given ``scores`` too (a queue of score lists, one per ``score`` call, or a function of the
conversation and the continuations), the backend also scores continuations
(:class:`~agentfsm.core.backend.ScoresContinuations`, ``capabilities.scoring``)::

    backend = ScriptedBackend(["Paris"], scores=[[-0.1, -9.6]])
    backend.score(messages, options, [" Paris", " Berlin"])  # [-0.1, -9.6]
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from agentfsm.core.backend import Capabilities, Completion, GenerationOptions, TextStream, Usage
from agentfsm.core.errors import ScriptExhausted, UsageError
from agentfsm.core.messages import PromptMessage

__all__ = [
    "Reply",
    "ScoreStep",
    "ScriptExhausted",
    "ScriptedBackend",
    "ScriptedRequest",
    "approx_tokens",
    "strip_prefill",
]

#: one scripted step: a reply text, a whole Completion, or an exception to raise
Reply = str | Completion | BaseException

#: one scripted ``score`` call: a log-probability per continuation, or an exception to raise
ScoreStep = Sequence[float] | BaseException
#: a function script for ``score``: (conversation, continuations) to one log-probability each
ScoreFunction = Callable[[Sequence[PromptMessage], Sequence[str]], Sequence[float]]

_CHUNK = 8  # characters per streamed delta


@dataclass(frozen=True)
class ScriptedRequest:
    """What the code under test sent to the backend, recorded for assertions."""

    messages: tuple[PromptMessage, ...]
    options: GenerationOptions
    #: the texts a ``score`` call was asked about (empty for a generation)
    continuations: tuple[str, ...] = ()


def approx_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters a token."""
    return (len(text) + 3) // 4


def strip_prefill(text: str, options: GenerationOptions) -> str:
    """Drop ``options.prefill`` from the front of ``text`` (backends return only the continuation)."""
    if options.prefill and text.startswith(options.prefill):
        return text[len(options.prefill) :]
    return text


class ScriptedBackend:
    """Answers from a queue of replies or from a function of the conversation.

    A reply that starts with the requested prefill is served without it, so scripts
    can be written as the whole assistant text. Capabilities are what you declare
    (default: plain chat), so tests can drive every enforcement level; ``scoring`` is
    set exactly when ``scores`` are given (the backend is then a
    :class:`~agentfsm.core.backend.ScoresContinuations`).
    """

    def __new__(
        cls,
        replies: Iterable[Reply] | Callable[[Sequence[PromptMessage]], Reply],
        capabilities: Capabilities | None = None,
        name: str = "scripted",
        scores: Iterable[ScoreStep] | ScoreFunction | None = None,
    ) -> ScriptedBackend:
        # a backend that scores is a subclass with the two methods: isinstance checks of
        # ScoresContinuations then tell the truth about this instance
        if scores is not None and cls is ScriptedBackend:
            cls = _ScoringScriptedBackend
        return super().__new__(cls)

    def __init__(
        self,
        replies: Iterable[Reply] | Callable[[Sequence[PromptMessage]], Reply],
        capabilities: Capabilities | None = None,
        name: str = "scripted",
        scores: Iterable[ScoreStep] | ScoreFunction | None = None,
    ) -> None:
        self._function: Callable[[Sequence[PromptMessage]], Reply] | None = None
        self._queue: deque[Reply] = deque()
        if callable(replies):
            self._function = replies
        else:
            self._queue.extend(replies)
        self._score_function: ScoreFunction | None = None
        self._score_queue: deque[ScoreStep] = deque()
        if callable(scores):
            self._score_function = scores
        elif scores is not None:
            self._score_queue.extend(scores)
        self._capabilities = (capabilities or Capabilities()).model_copy(update={"scoring": scores is not None})
        self._name = name
        self._lock = threading.Lock()
        #: every call, in order
        self.requests: list[ScriptedRequest] = []
        #: every ``score`` call, in order
        self.score_requests: list[ScriptedRequest] = []

    @property
    def name(self) -> str:
        """``scripted`` unless given."""
        return self._name

    @property
    def capabilities(self) -> Capabilities:
        """As declared at construction."""
        return self._capabilities

    @property
    def remaining(self) -> int:
        """Replies left in the queue (0 for a function script)."""
        return len(self._queue)

    def enqueue(self, *replies: Reply) -> None:
        """Append replies to a queue script."""
        self._queue.extend(replies)

    def complete(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Completion:
        """Record the call and serve the next reply."""
        with self._lock:
            self.requests.append(ScriptedRequest(tuple(messages), options))
            if self._function is not None:
                step = self._function(messages)
            elif self._queue:
                step = self._queue.popleft()
            else:
                raise ScriptExhausted(len(self.requests) - 1)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, Completion):
            return step.model_copy(update={"text": strip_prefill(step.text, options)})
        text = strip_prefill(step, options)
        prompt = sum(approx_tokens(m.content) for m in messages)
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=prompt, completion_tokens=approx_tokens(text)),
            finish_reason="stop",
            model=self._name,
        )

    async def acomplete(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Completion:
        """Async twin of :meth:`complete`."""
        return self.complete(messages, options)

    def stream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Iterator[str]:
        """The next reply in small deltas."""
        text = self.complete(messages, options).text
        for i in range(0, len(text), _CHUNK):
            yield text[i : i + _CHUNK]

    def astream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> AsyncIterator[str]:
        """Async twin of :meth:`stream`; the stream reports the reply's finish_reason and usage."""
        return TextStream(lambda end: self._adeltas(messages, options, end))

    async def _adeltas(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, end: TextStream
    ) -> AsyncIterator[str]:
        completion = self.complete(messages, options)
        end.max_tokens_sent = completion.max_tokens_sent  # known once it answers, as a live backend's is
        for i in range(0, len(completion.text), _CHUNK):
            yield completion.text[i : i + _CHUNK]
        end.finish_reason, end.usage, end.stop_sequence = completion.finish_reason, completion.usage, completion.stop_sequence

    def __repr__(self) -> str:
        return f"ScriptedBackend(name={self._name!r}, remaining={self.remaining})"


class _ScoringScriptedBackend(ScriptedBackend):
    """A :class:`ScriptedBackend` given ``scores``: it scores continuations from its script."""

    def score(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """Record the call and serve the next score list (one number per continuation)."""
        with self._lock:
            self.score_requests.append(ScriptedRequest(tuple(messages), options, tuple(continuations)))
            if self._score_function is not None:
                step: ScoreStep = self._score_function(messages, continuations)
            elif self._score_queue:
                step = self._score_queue.popleft()
            else:
                raise ScriptExhausted(len(self.score_requests) - 1, "score script")
        if isinstance(step, BaseException):
            raise step
        if len(step) != len(continuations):
            raise UsageError(f"scripted scores: {len(step)} numbers for {len(continuations)} continuations")
        return [float(value) for value in step]

    async def ascore(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """Async twin of :meth:`score`."""
        return self.score(messages, options, continuations)
