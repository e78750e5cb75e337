"""One model call of a turn as it arrives: its text, finish reason, usage, and the prose
the caller has been shown.

:func:`generate` makes the call into an :class:`Attempt`. Without a stream parser it is
one completion. With one it is streamed: each chunk is fed to the
:class:`~agentfsm.dialects.stream.StreamParser`, whose released prose is yielded unless
the attempt is *held* (the turn runner decides: a required call's preamble, JSON under a
grammar, and by default every attempt until the engine accepts it), and the loop is
given a turn every :data:`YIELD_EVERY` seconds of parsing, so a fast upstream whose
chunks are all buffered cannot hold it. What arrived is kept in ``Attempt.parts`` as it
comes, so a stream that ends early (the client left, the upstream broke off) still
leaves its text to be recorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from agentfsm.core.backend import Backend, GenerationOptions, TextStream, Usage
from agentfsm.core.messages import PromptMessage
from agentfsm.dialects.stream import StreamEvent, StreamParser, TextDelta
from agentfsm.runtime.model_calls import bounded, usage_of

__all__ = ["YIELD_EVERY", "Attempt", "generate"]

#: seconds of stream parsing after which the loop is given a turn
YIELD_EVERY = 0.005


@dataclass
class Attempt:
    """One model call as it arrives: its text, and the prose the caller has seen."""

    text: str = ""
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    forwarded: list[str] = field(default_factory=list)
    #: the completion limit the backend sent in place of the asked one (None: as asked)
    max_tokens_sent: int | None = None
    #: a stream's text as it arrives (the prefill first)
    parts: list[str] = field(default_factory=list)


async def generate(
    backend: Backend,
    prompt: list[PromptMessage],
    opts: GenerationOptions,
    prefill: str,
    out: Attempt,
    *,
    parser: StreamParser | None,
    hold: bool,
    deadline: float | None,
    on_limit: Callable[[int], None] | None = None,
) -> AsyncIterator[str]:
    """One model call into ``out``; with a ``parser``, streamed, yielding the prose it
    releases (nothing while ``hold``). ``on_limit`` is told a completion limit the backend
    lowered as soon as it is known: streamed, once the upstream answers, before any text."""
    if parser is None:
        completion = await bounded(backend.acomplete(prompt, opts), deadline)
        out.text = prefill + completion.text
        out.finish_reason = completion.finish_reason
        out.usage = usage_of(completion.usage, prompt, completion.text)
        out.max_tokens_sent = completion.max_tokens_sent
        return
    parts = out.parts
    parts.append(prefill)
    pending: list[StreamEvent] = parser.feed(prefill) if prefill else []
    source = backend.astream(prompt, opts)
    if isinstance(source, TextStream):

        def noted(limit: int) -> None:
            out.max_tokens_sent = limit
            if on_limit is not None:
                on_limit(limit)

        source.on_max_tokens_sent = noted
    since = time.monotonic()
    try:
        while True:
            try:
                piece = await bounded(anext(source), deadline)
            except StopAsyncIteration:
                break
            parts.append(piece)
            pending += parser.feed(piece)
            for text in _prose(pending, hold, out):
                yield text
            pending = []
            if time.monotonic() - since > YIELD_EVERY:
                # the upstream's chunks may all be buffered already: parse no longer at a stretch
                await asyncio.sleep(0)
                since = time.monotonic()
    finally:
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
    for text in _prose(parser.close(), hold, out):
        yield text
    out.text = "".join(parts)
    ended = source if isinstance(source, TextStream) else None
    out.finish_reason = (ended.finish_reason if ended else None) or "stop"
    out.usage = usage_of(ended.usage if ended else None, prompt, out.text[len(prefill):])
    out.max_tokens_sent = ended.max_tokens_sent if ended else None


def _prose(events: Sequence[StreamEvent], hold: bool, out: Attempt) -> list[str]:
    if hold:
        return []
    texts = [e.text for e in events if isinstance(e, TextDelta) and e.text]
    out.forwarded += texts
    return texts


