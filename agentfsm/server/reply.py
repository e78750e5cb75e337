"""The answer to a proxied request: the reply a finished turn (or a plain completion)
makes, the whole (non-streamed) answer, and the wait that a client's disconnect or the
request's deadline cuts short.

:func:`reply_for` and :func:`plain_reply` turn a finished turn or upstream reply into a
:class:`Reply` (streamed or whole alike; :func:`cut_by_client` the one for a budget spent on
replies cut at the client's ``max_tokens``). :func:`complete` answers a non-streamed
request (tool mode through the turn runner, :meth:`Exchange.turn`, otherwise a plain
pass through); :func:`until_disconnect` runs it, or any of the request's waits, so that a
client that goes away, or a request that outlives ``request_timeout``, cancels the
upstream call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeVar

from loguru import logger
from starlette.requests import Request

from agentfsm.core.errors import BackendTimeout, ClientGone, RetryBudgetExceeded
from agentfsm.core.events import ModelOutputEvent
from agentfsm.core.messages import ToolCall
from agentfsm.engine.decide import CallTools
from agentfsm.guards import json_valid
from agentfsm.protocols import estimate_tokens
from agentfsm.runtime.turn import TurnResult
from agentfsm.server.exchange import Exchange

__all__ = ["Reply", "complete", "cut_by_client", "plain_reply", "reply_for", "until_disconnect"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Reply:
    """A finished answer, ready to encode."""

    content: str | None
    calls: tuple[ToolCall, ...]
    finish_reason: str
    #: the correction budget ran out under ``auto``: the model's best acceptable reply
    exhausted: bool = False
    #: the client's stop sequence that ended the answer (``finish_reason`` ``stop_sequence``)
    stop_sequence: str | None = None


def reply_for(ex: Exchange, result: TurnResult) -> Reply:
    """The client's answer for a finished turn: calls with fresh ids, or the answer
    (``length`` when the accepted reply was cut at the token limit, ``stop_sequence`` when
    the turn ended it at one of the client's, :mod:`agentfsm.core.stops`)."""
    decision = result.decision
    if isinstance(decision, CallTools):
        return Reply(decision.assistant.content or None, ex.remint(decision.calls), "tool_calls")
    ex.exhausted = result.exhausted
    if result.stop_sequence is not None:
        return Reply(decision.content or None, (), "stop_sequence", exhausted=result.exhausted,
                     stop_sequence=result.stop_sequence)
    reason = "length" if result.finish_reason == "length" else "stop"
    return Reply(decision.content or None, (), reason, exhausted=result.exhausted)


def plain_reply(text: str, finish_reason: str | None, stop_sequence: str | None) -> Reply:
    """The answer of a request without tools, as the upstream ended it (the stop
    sequence it names, where it names one)."""
    if stop_sequence is not None:
        return Reply(text or None, (), "stop_sequence", stop_sequence=stop_sequence)
    return Reply(text or None, (), "length" if finish_reason == "length" else "stop")


def cut_by_client(ex: Exchange, exc: RetryBudgetExceeded) -> Reply | None:
    """The answer for a turn whose budget went on actions cut at the client's own
    ``max_tokens`` (``truncated_action``, the last of them): the provider's answer to a
    reply cut there (a 200 whose finish reason is ``length``, Anthropic's ``max_tokens``),
    with no call, since none can be read from a cut action. A give-up would be retried
    by the SDK and cut again; the limit is the client's to raise. None for any other
    give-up, and where the client set no limit (the proxy's own default is its failure)."""
    if exc.reason != json_valid.TRUNCATED or ex.request.max_tokens is None:
        return None
    logger.info("every reply was cut at the client's max_tokens={}: answering with finish_reason length",
                ex.request.max_tokens)
    ex.exhausted = True
    return Reply(None, (), "length", exhausted=True)


async def complete(ex: Exchange) -> Reply:
    """Answer a non-streamed request: a deciding turn in tool mode, else a plain completion."""
    if ex.request.tool_mode:
        try:
            async with aclosing(ex.turn()) as items:
                async for item in items:
                    if isinstance(item, TurnResult):
                        return reply_for(ex, item)
        except RetryBudgetExceeded as exc:
            cut = cut_by_client(ex, exc)
            if cut is None:
                raise
            return cut
        raise AssertionError("the turn ended without a result")  # pragma: no cover
    prompt, options = ex.plain_request()
    completion = await ex.backend.acomplete(prompt, options)
    ex.tally.sent_limit(completion.max_tokens_sent)
    prompt_tokens = completion.usage.prompt_tokens or sum(estimate_tokens(m.content) for m in prompt)
    ex.add_usage(prompt_tokens, completion.usage.completion_tokens or estimate_tokens(completion.text))
    ex.recorder.emit(ModelOutputEvent, text=completion.text, usage=completion.usage,
                     finish_reason=completion.finish_reason, max_tokens_sent=completion.max_tokens_sent)
    return plain_reply(completion.text, completion.finish_reason, completion.stop_sequence)


async def _disconnected(request: Request) -> None:
    # The body has been read, so the next message the server hands us is the disconnect.
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def until_disconnect(
    request: Request, work: Awaitable[_T], deadline: float | None, *, watch: bool = True
) -> _T:
    """Await ``work``; cancel it when the client goes away or the deadline passes.

    Raises :class:`ClientGone` on a disconnect and :class:`BackendTimeout` past the deadline.
    ``work`` runs in the calling task (no task of its own); a watcher task cancels it
    when the client's disconnect arrives.
    """
    me = asyncio.current_task()
    assert me is not None
    gone = False

    async def watcher_body() -> None:
        nonlocal gone
        await _disconnected(request)
        gone = True
        me.cancel()

    watcher = asyncio.get_running_loop().create_task(watcher_body()) if watch else None
    bound = asyncio.timeout_at(deadline)
    try:
        async with bound:
            return await work
    except TimeoutError as exc:
        if not bound.expired():
            raise  # the work's own error
        raise BackendTimeout("the request did not finish within the proxy's request timeout") from exc
    except asyncio.CancelledError:
        if gone and me.uncancel() == 0:  # the watcher's cancel, not a cancel from outside
            logger.info("client disconnected; upstream call cancelled")
            raise ClientGone("client disconnected") from None
        raise
    finally:
        if watcher is not None:
            watcher.cancel()  # synchronous: it cancels nothing once this returns
