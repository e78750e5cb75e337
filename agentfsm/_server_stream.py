"""Streamed answers: server-sent events produced while the model is still writing.

Tool mode, one attempt at a time: the upstream's text goes through a
:class:`~agentfsm.stream.StreamParser`; prose deltas are forwarded as content deltas
as soon as the parser releases them (action text is held back by the parser and never
reaches the client). When the attempt ends, the engine decides on the whole text:

- a call: the calls go out, each with a fresh id, its name, then its arguments;
- an answer: the stream finishes;
- a correction: the correction is sent upstream and the next attempt streams on.
  Prose already forwarded from a rejected attempt stays with the client (it cannot
  be taken back); only its action text was withheld.

Prose is *held* (sent only once the engine has accepted the attempt) when a call is
required (``tool_choice`` required or a named tool), since such a turn's prose is
only a preamble to the call, and under ``constrained`` enforcement, where the model
writes JSON, not prose: there the final content is sent as one delta.

Headers are sent with the first event, so ``x-agentfsm-attempts`` counts the
attempts known then; the final count is in an SSE comment before the stream's end
(``: agentfsm attempts=N corrections=M``), which SDKs ignore.

Failures: an error before the first event is answered as a normal HTTP error (the
handler primes the stream); after it, the stream ends with the protocol's error
event, never with a clean end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing

from loguru import logger

from agentfsm._server_turn import Exchange, Reply
from agentfsm._server_wire import StreamSink
from agentfsm.backends.base import GenerationOptions
from agentfsm.engine import CallTools, Correct, Fail, step
from agentfsm.enforcement import call_required
from agentfsm.errors import AgentFSMError, BackendTimeout
from agentfsm.messages import Message, PromptMessage
from agentfsm.protocols import estimate_tokens
from agentfsm.stream import StreamEvent, StreamParser, TextDelta
from agentfsm.turn import prepare_request, record_decision

__all__ = ["stream_events"]


def stream_events(ex: Exchange, sink: StreamSink) -> AsyncIterator[str]:
    """The SSE strings answering ``ex``: tool mode or a plain pass-through."""
    inner = _tool_mode(ex, sink) if ex.request.tool_mode else _plain(ex, sink)
    return _guarded(ex, sink, inner)


async def _guarded(ex: Exchange, sink: StreamSink, inner: AsyncIterator[str]) -> AsyncIterator[str]:
    """Ends the stream properly whatever happens, and records how it ended."""
    sent = False
    try:
        async for event in inner:
            sent = True
            yield event
    except AgentFSMError as exc:
        ex.end(error=exc)
        if not sent:
            raise  # nothing sent yet: the handler answers with an HTTP error status
        logger.warning("stream ended by {}: {}", type(exc).__name__, exc)
        for event in sink.fail(exc):
            yield event
    except asyncio.CancelledError:
        ex.end(error=ConnectionAbortedError("client disconnected"))
        raise
    except Exception as exc:
        logger.exception("unexpected error while streaming")
        ex.end(error=exc)
        if not sent:
            raise
        for event in sink.fail(None):
            yield event
    finally:
        await _aclose(inner)


async def _aclose(iterator: AsyncIterator[str]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


async def _pieces(
    ex: Exchange, prompt: list[PromptMessage], options: GenerationOptions
) -> AsyncGenerator[str, None]:
    """The upstream's text deltas, each wait bounded by the request's deadline."""
    upstream = ex.backend.astream(prompt, options)
    try:
        while True:
            try:
                if ex.deadline is None:
                    piece = await anext(upstream)
                else:
                    async with asyncio.timeout_at(ex.deadline):
                        piece = await anext(upstream)
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise BackendTimeout(
                    "the request did not finish within the proxy's request timeout"
                ) from exc
            yield piece
    finally:
        await _aclose(upstream)


async def _plain(ex: Exchange, sink: StreamSink) -> AsyncIterator[str]:
    """No tools: the model's text, forwarded delta by delta."""
    prompt = ex.plain_prompt()
    options = ex.options
    ex.attempts = 1
    ex.emit(
        "model_request",
        attempt=1,
        messages=[m.model_dump(mode="json") for m in prompt],
        options=options.model_dump(mode="json"),
        enforcement="prompt",
    )
    parts: list[str] = []
    async with aclosing(_pieces(ex, prompt, options)) as pieces:
        async for piece in pieces:
            parts.append(piece)
            for event in sink.text(piece):
                yield event
    text = "".join(parts)
    ex.add_usage(sum(estimate_tokens(m.content) for m in prompt), estimate_tokens(text))
    ex.emit("model_output", text=text, usage=ex.usage.model_dump(), finish_reason="stop")
    reply = Reply(text or None, (), "stop")
    ex.end(reply)
    for event in _ending(ex, sink, reply):
        yield event


async def _tool_mode(ex: Exchange, sink: StreamSink) -> AsyncIterator[str]:
    """Attempts until the engine accepts one, streaming prose as it comes."""
    history: list[Message] = list(ex.request.messages)
    config = ex.config
    while True:
        prompt, options, level, prefill = prepare_request(
            ex.backend, history, config, ex.settings.enforcement, ex.options
        )
        ex.attempts += 1
        ex.emit(
            "model_request",
            attempt=ex.attempts,
            messages=[m.model_dump(mode="json") for m in prompt],
            options=options.model_dump(mode="json"),
            enforcement=level,
        )
        hold = level == "constrained" or call_required(config.tool_choice)
        parser = StreamParser(config.tools, config.dialect)
        parts = [prefill] if prefill else []
        forwarded: list[str] = []
        pending = parser.feed(prefill) if prefill else []
        async with aclosing(_pieces(ex, prompt, options)) as pieces:
            async for piece in pieces:
                parts.append(piece)
                pending += parser.feed(piece)
                for event in _prose(pending, hold, forwarded, sink):
                    yield event
                pending = []
        pending += parser.close()
        for event in _prose(pending, hold, forwarded, sink):
            yield event

        text = "".join(parts)
        ex.add_usage(sum(estimate_tokens(m.content) for m in prompt), estimate_tokens(text))
        ex.emit("model_output", text=text, usage=ex.usage.model_dump(), finish_reason="stop")
        decision = step(history, text, config)
        record_decision(decision, ex.emit, None)
        if isinstance(decision, Correct):
            ex.corrections += 1
            ex.emit(
                "retry", reason=decision.reason, attempt=decision.attempt, message=decision.message.content
            )
            history.extend([decision.assistant, decision.message])
            continue
        if isinstance(decision, Fail):
            raise decision.error
        history.append(decision.assistant)
        content = decision.assistant.content or ""
        for event in sink.text(_unsent(content, "".join(forwarded))):
            yield event
        if isinstance(decision, CallTools):
            reply = Reply(content or None, ex.remint(decision.calls), "tool_calls")
        else:
            reply = Reply(content or None, (), "stop")
        ex.end(reply)
        for event in _ending(ex, sink, reply):
            yield event
        return


def _prose(events: Sequence[StreamEvent], hold: bool, forwarded: list[str], sink: StreamSink) -> list[str]:
    """SSE for the prose deltas among ``events`` (none while prose is held)."""
    out: list[str] = []
    if hold:
        return out
    for event in events:
        if isinstance(event, TextDelta) and event.text:
            forwarded.append(event.text)
            out += sink.text(event.text)
    return out


def _unsent(content: str, forwarded: str) -> str:
    """What of the accepted content the client has not seen yet.

    Normally nothing (the parser forwarded it all) or everything (prose was held). When
    the engine's content is the forwarded prose plus more (e.g. a ``final`` object's
    text), the rest; when they disagree otherwise, nothing: text cannot be taken back.
    """
    if not forwarded.strip():
        return content
    if content.startswith(forwarded):
        return content[len(forwarded):]
    if content.strip().startswith(forwarded.strip()):
        return content.strip()[len(forwarded.strip()):]
    return ""


def _ending(ex: Exchange, sink: StreamSink, reply: Reply) -> list[str]:
    out = [sink.comment(f"agentfsm attempts={ex.attempts} corrections={ex.corrections}")]
    out += sink.calls(reply.calls)
    out += sink.finish(reply.finish_reason, ex.usage)
    return out
