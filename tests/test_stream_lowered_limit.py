"""A stream whose headers leave with a keep-alive names the max_tokens the backend lowered,
where it was lowered by then.

Defect (the wire audit): an upstream refused a client's ``max_tokens`` (its context could
not hold it beside the prompt), the backend sent the call again with what the context
leaves, and the upstream answered at once, but was slow to its first token (a long
prompt). The proxy's first keep-alive then sent the headers, and ``x-agentfsm-defaults``
left without ``max_tokens=N``: the stream noted the lowered limit only with the first
token, though the backend knew it from the upstream's answer. Now the backend tells the
stream as soon as it knows it (``TextStream.on_max_tokens_sent``), with tools or without.
An upstream slow to answer at all is another matter: nothing was lowered yet when the
headers left, and the closing comment names the limit (docs/proxy.md), as it did.

Real parts: an upstream on 127.0.0.1 (the fake's own HTTP server) that sends OpenAI's
context-length 400, then its stream's headers, and holds its first token (or its whole
answer) until the client has read the proxy's headers; the proxy with a short keep-alive;
the official openai SDK, reading the headers and the raw SSE lines.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from agentfsm.backends import OpenAICompatBackend, Timeouts
from agentfsm.testing._http import HTTPRequest, ResponseWriter, ThreadedHTTPServer
from tests._proxy import TOOLS_OPENAI, proxy

#: the upstream's context, and the prompt tokens it says the messages take
CONTEXT, PROMPT = 1007, 7
MANY = 100_000
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the weather in Paris?"}]
#: seconds without an event before the proxy's first keep-alive: far longer than the upstream
#: takes to refuse the limit and answer the call sent again (a few ms on 127.0.0.1)
PATIENT = 2.0


class _SlowUpstream:
    """Refuses a ``max_tokens`` past its context; then answers (headers, or not even them,
    when ``late``) and writes nothing more until :attr:`release` is set."""

    def __init__(self, *, late: bool) -> None:
        self.late = late
        self.release = threading.Event()
        self.limits: list[Any] = []
        self._server = ThreadedHTTPServer(self._handle)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.port}/v1"

    async def _handle(self, request: HTTPRequest, out: ResponseWriter) -> None:
        limit = (request.json() or {}).get("max_tokens")
        self.limits.append(limit)
        if isinstance(limit, int) and limit + PROMPT > CONTEXT:
            message = (f"This model's maximum context length is {CONTEXT} tokens. However, you requested "
                       f"{limit + PROMPT} tokens ({PROMPT} in the messages, {limit} in the completion). "
                       "Please reduce the length of the messages or completion.")
            error = {"message": message, "type": "invalid_request_error", "param": "messages",
                     "code": "context_length_exceeded"}
            await out.send(400, json.dumps({"error": error}).encode())
            return
        if self.late:
            await asyncio.to_thread(self.release.wait, 30)
        await out.start_chunked(200, "text/event-stream")
        if not self.late:
            await asyncio.to_thread(self.release.wait, 30)
        for delta, finish in (({"content": "It is sunny."}, None), ({}, "stop")):
            chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await out.chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await out.chunk(b"data: [DONE]\n\n")
        await out.end_chunked()

    def __enter__(self) -> _SlowUpstream:
        self._server.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self._server.stop()


@contextmanager
def _served(late: bool, keep_alive: float) -> Iterator[tuple[_SlowUpstream, str]]:
    with _SlowUpstream(late=late) as upstream:
        backend = OpenAICompatBackend(upstream.base_url, model="m", api_key="k",
                                      timeout=Timeouts(connect=2.0, read=30.0, total=60.0), max_retries=0)
        with proxy(backend, keep_alive=keep_alive) as url:
            yield upstream, url


def _ask(upstream: _SlowUpstream, url: str, tools: bool) -> tuple[str, list[str]]:
    """The proxy's ``x-agentfsm-defaults`` and the stream's lines; the upstream is let go on
    only once the headers have arrived (with a keep-alive: nothing else could carry them)."""
    extra: dict[str, Any] = {"tools": TOOLS_OPENAI} if tools else {}
    with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=30) as client:
        with client.chat.completions.with_streaming_response.create(
            model="m", messages=USER, stream=True, max_tokens=MANY, **extra
        ) as response:
            defaults = response.headers["x-agentfsm-defaults"]
            upstream.release.set()
            lines = [line for line in response.iter_lines() if line]
    assert "It is sunny." in "".join(lines) and lines[-1] == "data: [DONE]"
    return defaults, lines


def _closing(lines: list[str]) -> str:
    [line] = [ln for ln in lines if ln.startswith(": agentfsm ")]
    return line


@pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])
def test_headers_sent_by_a_keep_alive_name_a_limit_lowered_before_them(tools: bool) -> None:
    with _served(late=False, keep_alive=PATIENT) as (upstream, url):
        defaults, lines = _ask(upstream, url, tools)
    asked, sent = upstream.limits
    assert asked == MANY and sent == CONTEXT - PROMPT
    assert lines[0] == ": keep-alive"  # the headers left with it, before the first token
    assert defaults.split(",") == ["temperature=0", "seed=0", f"max_tokens={sent}"]
    assert _closing(lines).endswith(f" max_tokens={sent}")


@pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])
def test_a_limit_lowered_after_the_headers_left_is_in_the_closing_comment(tools: bool) -> None:
    # the upstream refused at once but did not answer the call sent again before the
    # headers left: they cannot name what was not yet known
    with _served(late=True, keep_alive=0.1) as (upstream, url):
        defaults, lines = _ask(upstream, url, tools)
    asked, sent = upstream.limits
    assert asked == MANY and sent == CONTEXT - PROMPT
    assert lines[0] == ": keep-alive"
    assert defaults.split(",") == ["temperature=0", "seed=0"]
    assert _closing(lines).endswith(f" max_tokens={sent}")
