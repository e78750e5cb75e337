"""Streamed answers: server-sent events produced while the model is still writing.

Tool mode is the turn runner (:func:`~agentfsm.runtime.turn.stream_turn`) with
``stream=True``; this module only encodes what it yields, and the runner decides what
is held. By default (``stream_prose`` ``exact``) each attempt's prose is *held* until
the engine accepts the attempt, then sent as one delta: a refused attempt's prose
never reaches the client, so the stream carries the text and calls of the same request
answered whole. With ``live`` the runner releases prose as the stream parser lets it go
(action text never reaches the client), where a prose answer is allowed; prose already
forwarded from an attempt the engine then refuses stays with the client (it cannot be
taken back), and the next attempt's follows. Held even then: a required call's
preamble, JSON under ``constrained`` enforcement, an answer held to a client's schema.

When an attempt is accepted:

- a call: the calls go out, each with a fresh id, its name, then its arguments;
- an answer: the stream finishes (``length`` when the upstream cut it);
- a correction: the correction is sent upstream and the next attempt runs.

Decisions, extension (parallel calls), retries and usage are the runner's, so a
streamed request decides exactly as a non-streamed one.

Kept alive: a stream that has had nothing to send for ``keep_alive`` seconds
(:attr:`~agentfsm.server.settings.Settings.keep_alive`, 15 by default) sends a
keep-alive, which clients skip (:meth:`~agentfsm.server.wire.Wire.keep_alive`: an SSE
comment; Anthropic's ``ping`` event): a held turn on a slow model can take minutes, and
clients, reverse proxies and load balancers give up on a stream that sends nothing.

Headers are sent with the first event (a keep-alive too), so ``x-agentfsm-attempts``
counts the attempts known then; the final count is in an SSE comment before the
stream's end (``: agentfsm attempts=N corrections=M``), which SDKs ignore.

Failures: an error before the first event is answered as a normal HTTP error (the
handler primes the stream); after it (a keep-alive too), the stream ends with the
protocol's error event, never with a clean end. A spent correction budget under a
required call is a server-side error (OpenAI ``server_error``, Anthropic ``api_error``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import aclosing, suppress

import anyio
from loguru import logger

from agentfsm.core.backend import TextStream
from agentfsm.core.errors import AgentFSMError, ClientGone, RetryBudgetExceeded
from agentfsm.core.events import ModelOutputEvent
from agentfsm.runtime.model_calls import record_cut
from agentfsm.runtime.attempt import YIELD_EVERY
from agentfsm.runtime.model_calls import bounded, usage_of
from agentfsm.server.exchange import Exchange
from agentfsm.server.reply import Reply, cut_by_client, plain_reply, reply_for
from agentfsm.server.wire import StreamSink

__all__ = ["SHUT_DOWN", "stream_events"]

#: what a request that the server's stop cut off is told (whole: a 503, which the SDKs retry)
SHUT_DOWN = "the proxy shut down before this request finished; ask again"


def stream_events(ex: Exchange, sink: StreamSink) -> AsyncIterator[str]:
    """The SSE strings answering ``ex``: tool mode or a plain pass-through, kept alive."""
    inner = _tool_mode(ex, sink) if ex.request.tool_mode else _plain(ex, sink)
    return _guarded(ex, sink, _kept_alive(inner, ex.settings.keep_alive, sink.keep_alive()))


#: events the stream may produce ahead of those the client has taken
_READ_AHEAD = 8
#: seconds a stream cut off waits for its events to end (they were cancelled)
_PUMP_END = 5.0
#: the queue's wake-up when the stream has ended (the ending itself is the pump's result)
_ENDED = object()


async def _kept_alive(events: AsyncIterator[str], every: float, ping: str) -> AsyncIterator[str]:
    """``events``, with ``ping`` in between whenever ``every`` seconds pass without one.

    ``events`` runs in a task of its own (the pump, a few events ahead at most) so that
    this generator can send a ping while the next event is still being made; its errors
    come out here, raised as they were. Closed or cancelled (the client left, the server
    stopped), this generator cancels the pump and waits for it to end: ``events`` sees
    the cancellation where it was waiting, as it would have here.
    """
    queue: asyncio.Queue[object] = asyncio.Queue(_READ_AHEAD)
    pump = asyncio.get_running_loop().create_task(_pump(events, queue))
    # the ending wakes a wait on an empty queue (a full one is read before it is awaited)
    pump.add_done_callback(lambda _: _offer(queue, _ENDED))
    try:
        while True:
            if queue.empty():
                if pump.done():
                    pump.result()  # the stream's error, if it failed
                    return
                try:
                    async with asyncio.timeout(every):
                        item = await queue.get()
                except TimeoutError:
                    if queue.empty() and not pump.done():  # (not when it ended meanwhile)
                        yield ping
                    continue
            else:
                item = queue.get_nowait()
            if isinstance(item, str):
                yield item
    finally:
        if not pump.done():
            pump.cancel()
            # ``events`` ends (the upstream closed, a cut recorded) before the stream's
            # end is recorded; shielded from a cancellation delivered again at each wait
            # (Starlette's task group, when the client leaves), bounded all the same
            with anyio.move_on_after(_PUMP_END, shield=True):
                await asyncio.wait({pump})
        if pump.done() and not pump.cancelled():
            pump.exception()  # retrieved: raised above, or nobody is left to tell


async def _pump(events: AsyncIterator[str], queue: asyncio.Queue[object]) -> None:
    try:
        async for event in events:
            await queue.put(event)
    finally:
        await _aclose(events)


def _offer(queue: asyncio.Queue[object], item: object) -> None:
    with suppress(asyncio.QueueFull):
        queue.put_nowait(item)


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
        logger.warning("stream ended by {} (model {}, {}): {}", type(exc).__name__, ex.model_entry, ex.backend.name, exc)
        for event in sink.fail(exc, entry=ex.model_entry):
            yield event
    except asyncio.CancelledError:
        # the client left (the response's disconnect watcher cancels the stream) or the
        # server stopped (its shutdown timeout passed): either way the run was cut off
        ex.end(error=ClientGone("client disconnected"))
        if not sent:
            raise
        # a client still there is told why its stream ends (a gone one reads nothing); the
        # events are written without waiting, so the cancellation is not delivered again
        for event in sink.fail(None, SHUT_DOWN):
            yield event
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


async def _plain(ex: Exchange, sink: StreamSink) -> AsyncIterator[str]:
    """No tools: the model's text, forwarded delta by delta."""
    prompt, options = ex.plain_request()
    parts: list[str] = []
    upstream = ex.backend.astream(prompt, options)
    if isinstance(upstream, TextStream):  # noted once the upstream answers (headers may leave before its first token)
        upstream.on_max_tokens_sent = ex.tally.sent_limit
    since = time.monotonic()
    try:
        while True:
            try:
                piece = await bounded(anext(upstream), ex.deadline)
            except StopAsyncIteration:
                break
            parts.append(piece)
            for event in sink.text(piece):
                yield event
            if time.monotonic() - since > YIELD_EVERY:
                # chunks all buffered already: let the loop see a client that left
                await asyncio.sleep(0)
                since = time.monotonic()
    except BaseException:  # the client left, or the stream failed: what it had seen is recorded
        record_cut(ex.recorder, ex.tally, prompt, parts,
                   max_tokens_sent=upstream.max_tokens_sent if isinstance(upstream, TextStream) else None)
        raise
    finally:
        await _aclose(upstream)
    text = "".join(parts)
    ended = upstream if isinstance(upstream, TextStream) else None
    ex.tally.sent_limit(ended.max_tokens_sent if ended else None)
    finish = (ended.finish_reason if ended else None) or "stop"
    usage = usage_of(ended.usage if ended else None, prompt, text)
    ex.tally.charge(usage)
    ex.recorder.emit(ModelOutputEvent, text=text, usage=usage, finish_reason=finish,
                     max_tokens_sent=ended.max_tokens_sent if ended else None)
    reply = plain_reply(text, finish, ended.stop_sequence if ended else None)
    ex.end(reply)
    for event in _ending(ex, sink, reply):
        yield event


async def _tool_mode(ex: Exchange, sink: StreamSink) -> AsyncIterator[str]:
    """The turn runner, streaming: prose deltas as it releases them, then the calls."""
    try:
        async with aclosing(ex.turn(stream=True)) as items:
            async for item in items:
                if isinstance(item, str):
                    for event in sink.text(item):
                        yield event
                    continue
                reply = reply_for(ex, item)
                ex.end(reply)
                for event in _ending(ex, sink, reply):
                    yield event
    except RetryBudgetExceeded as exc:
        cut = cut_by_client(ex, exc)
        if cut is None:
            raise
        ex.end(cut)
        for event in _ending(ex, sink, cut):
            yield event


def _ending(ex: Exchange, sink: StreamSink, reply: Reply) -> list[str]:
    out = [sink.comment(ex.trailer())]
    out += sink.calls(reply.calls)
    out += sink.finish(reply.finish_reason, ex.usage, reply.stop_sequence)
    return out
