"""A backend that serves the raw model outputs recorded in a transcript, in order.

Replay needs neither the model nor the tools: today's parser and guards see exactly
the text the model wrote then. When today's code asks for more replies than were
recorded (it decided differently), :class:`~agentfsm.backends.scripted.ScriptExhausted`
is raised, which the replay report treats as a divergence.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from agentfsm.backends.scripted import ScriptedBackend, ScriptExhausted
from agentfsm.core.backend import Capabilities, Completion, GenerationOptions, ScoresContinuations, TextStream
from agentfsm.core.events import ChoiceEvent, ModelOutputEvent, TranscriptEvent, parse_event
from agentfsm.core.messages import PromptMessage
from agentfsm.runtime.transcript import read_events

__all__ = ["ReplayBackend", "read_model_outputs", "read_scores"]

#: a transcript: its file, or its events (typed, or as JSON objects)
TranscriptSource = str | os.PathLike[str] | Iterable[TranscriptEvent | Mapping[str, Any]]


def _events(source: TranscriptSource) -> Iterator[TranscriptEvent]:
    if isinstance(source, str | os.PathLike):
        yield from read_events(source)
        return
    for item in source:
        yield parse_event(item) if isinstance(item, Mapping) else item


def read_model_outputs(source: TranscriptSource, run: str | None = None) -> list[Completion]:
    """The ``model_output`` events of a transcript (file or events), as Completions.

    ``run`` keeps only the events of that run id; the text keeps its prefill, and the
    ``max_tokens`` a backend lowered is served with it (so the replayed run's tally, and so
    a proxy's headers, name it as the recorded one did). A ``cut``
    output (a stream that ended before the model did) is no completion and is left out:
    nothing decided on it, so today's run stops there for want of output, as it did then.
    """
    return [
        Completion(text=e.text, usage=e.usage, finish_reason=e.finish_reason, model="replay",
                   max_tokens_sent=e.max_tokens_sent)
        for e in _events(source)
        if isinstance(e, ModelOutputEvent) and not e.cut and (run is None or e.run == run)
    ]


def read_scores(source: TranscriptSource, run: str | None = None) -> list[tuple[float, ...]]:
    """The score lists of a transcript's ``choice`` events, in the order the runtime asked
    for them (each choice: its content-free baseline, then its scores)."""
    served: list[tuple[float, ...]] = []
    for e in _events(source):
        if isinstance(e, ChoiceEvent) and (run is None or e.run == run):
            served += [e.baseline, e.scores]
    return served


class ReplayBackend:
    """Serves a transcript's recorded model outputs in order.

    Capabilities claim prefill and JSON-schema support so that the engine asks at
    the enforcement level it used when recording; the recorded text already is what
    the model produced under it. A recorded text that starts with the requested
    prefill is served without it, as a live backend would.
    """

    def __init__(
        self,
        path_or_events: TranscriptSource,
        run: str | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        events = list(_events(path_or_events))
        self.outputs = read_model_outputs(events, run=run)
        scores = read_scores(events, run=run)
        # a run that scored a choice is replayed with its scores (and so chooses the same)
        self._script = ScriptedBackend(
            list(self.outputs),
            capabilities or Capabilities(prefill=True, json_schema=True),
            name="replay",
            scores=scores or None,
        )

    @property
    def name(self) -> str:
        """Always ``replay``."""
        return "replay"

    @property
    def capabilities(self) -> Capabilities:
        """Prefill and JSON schema unless given otherwise."""
        return self._script.capabilities

    @property
    def served(self) -> int:
        """How many recorded outputs have been served."""
        return len(self.outputs) - self._script.remaining

    @property
    def remaining(self) -> int:
        """How many recorded outputs are left."""
        return self._script.remaining

    def complete(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Completion:
        """The next recorded output (without the requested prefill)."""
        try:
            return self._script.complete(messages, options)
        except ScriptExhausted as exc:
            raise ScriptExhausted(exc.served, source="replay transcript") from None

    async def acomplete(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Completion:
        """Async twin of :meth:`complete`."""
        return self.complete(messages, options)

    def score(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """The next recorded score list (a run that recorded no choice has none)."""
        scorer = self._script
        if not isinstance(scorer, ScoresContinuations):
            raise ScriptExhausted(0, source="replay transcript (no recorded choice)")
        try:
            return scorer.score(messages, options, continuations)
        except ScriptExhausted as exc:
            raise ScriptExhausted(exc.served, source="replay transcript's choices") from None

    async def ascore(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, continuations: Sequence[str]
    ) -> list[float]:
        """Async twin of :meth:`score`."""
        return self.score(messages, options, continuations)

    def stream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Iterator[str]:
        """The next recorded output as one delta."""
        yield self.complete(messages, options).text

    def astream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> AsyncIterator[str]:
        """Async twin of :meth:`stream`; the stream reports the recorded finish_reason and usage."""
        return TextStream(lambda end: self._adeltas(messages, options, end))

    async def _adeltas(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, end: TextStream
    ) -> AsyncIterator[str]:
        completion = self.complete(messages, options)
        yield completion.text
        end.finish_reason, end.usage = completion.finish_reason, completion.usage

    def __repr__(self) -> str:
        return f"ReplayBackend(outputs={len(self.outputs)}, served={self.served})"
