"""A scripted OpenAI-compatible upstream: a real HTTP server on 127.0.0.1.

For tests of anything that talks HTTP to a chat model (backends, the proxy, batch
runs). Each ``POST /v1/chat/completions`` takes the next step of a script (a queue,
or a function of the request) and answers it: a reply, or a fault::

    from agentfsm.testing import FakeUpstream, reset, status

    with FakeUpstream([reset(), status(429, retry_after=1), "hello"]) as fake:
        backend = OpenAICompatBackend(fake.base_url, model="fake")
        ...
        assert fake.requests[-1].headers["authorization"] == "Bearer sk-test"

Requests with ``"stream": true`` are answered as SSE, others as one JSON body; a stream
ends with a usage chunk when the request asks for one (``stream_options.include_usage``),
as OpenAI's does. The server is asyncio-based, so many concurrent requests with
``latency()`` overlap.

Like a real model, it can keep to limits: with ``honour_max_tokens`` a reply longer
than the request's ``max_tokens`` (four characters a token) is cut there, with
``finish_reason: "length"``; with ``honour_stop`` a reply is cut before the first of the
request's ``stop`` sequences that completes in it, and names it as vLLM does
(``stop_reason``); with ``context_tokens`` a request whose messages, or
messages and ``max_tokens``, exceed that context is answered with OpenAI's own 400
(``context_length_exceeded``, "... (P in the messages, C in the completion)").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType

import orjson

from agentfsm.core._types import JSONObject
from agentfsm.core.stops import cut_at_stop
from agentfsm.testing._http import HTTPRequest, ResponseWriter, ThreadedHTTPServer
from agentfsm.testing.fake_script import FakeReply, ReceivedRequest, Script, status

__all__ = ["FakeUpstream"]


def _echo(request: ReceivedRequest) -> FakeReply:
    last = request.messages[-1].get("content", "") if request.messages else ""
    return FakeReply(text=f"echo: {last}")


def _count(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class FakeUpstream:
    """An OpenAI-compatible chat server on 127.0.0.1 answering from a script.

    ``script``: a sequence of steps (served in order; more can be added with
    :meth:`enqueue`), a function of the request, or None to echo the last message.
    A step is a :class:`FakeReply` or a plain string (a normal reply). When a queue
    runs out the fake answers 500 with ``fake upstream script exhausted``.
    """

    def __init__(
        self,
        script: Script = None,
        *,
        model: str = "fake-model",
        port: int = 0,
        keep_requests: bool = True,
        honour_max_tokens: bool = False,
        honour_stop: bool = False,
        context_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.honour_max_tokens = honour_max_tokens
        self.honour_stop = honour_stop
        self.context_tokens = context_tokens
        self._keep = keep_requests
        self._function: Callable[[ReceivedRequest], FakeReply | str] | None = None
        self._queue: deque[FakeReply | str] = deque()
        if script is None:
            self._function = _echo
        elif callable(script):
            self._function = script
        else:
            self._queue.extend(script)
        #: every request received, in arrival order (none with ``keep_requests=False``:
        #: a load test's fake would otherwise hold every body it was sent)
        self.requests: list[ReceivedRequest] = []
        self._server = ThreadedHTTPServer(self._handle, port=port)
        self._ids = 0
        #: chat requests being answered right now, and the most at any one time
        self.in_flight = 0
        self.peak_in_flight = 0

    # lifecycle -------------------------------------------------------------
    def start(self) -> FakeUpstream:
        """Start serving (idempotent use through ``with`` is preferred)."""
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection."""
        self._server.stop()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._server.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def enqueue(self, *steps: FakeReply | str) -> None:
        """Append steps to a queue script."""
        self._queue.extend(steps)

    @property
    def chat_requests(self) -> list[ReceivedRequest]:
        """The chat-completion requests received (other paths left out)."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # serving ---------------------------------------------------------------
    async def _handle(self, raw: HTTPRequest, out: ResponseWriter) -> None:
        request = ReceivedRequest(
            raw.method, raw.path, dict(raw.headers), raw.json(), time.monotonic(), raw.query
        )
        if self._keep:
            self.requests.append(request)
        if raw.method == "GET" and raw.path.rstrip("/") in ("/v1/models", "/models"):
            data = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
            await out.send(200, json.dumps(data).encode())
            return
        if raw.method != "POST" or not raw.path.endswith("/chat/completions"):
            await out.send(404, _error_body(f"no route {raw.method} {raw.path}", "not_found"))
            return
        step = self._next_step(request)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if step.latency:  # a client that leaves meanwhile ends it, as a real upstream's would
                await out.wait(step.latency)
            await self._answer(request, step, out)
        finally:
            self.in_flight -= 1

    def _next_step(self, request: ReceivedRequest) -> FakeReply:
        too_long = self._context_error(request)
        if too_long is not None:
            return too_long
        if self._function is not None:
            step: FakeReply | str = self._function(request)
        elif self._queue:
            step = self._queue.popleft()
        else:
            step = status(500, body=_error_body("fake upstream script exhausted").decode())
        step = FakeReply(text=step) if isinstance(step, str) else step
        limit = request.body.get("max_tokens") if isinstance(request.body, dict) else None
        if self.honour_max_tokens and isinstance(limit, int) and step.status == 200 and _count(step.text) > limit:
            step = FakeReply(text=step.text[: 4 * limit], finish_reason="length", latency=step.latency, usage=step.usage)
        stops = request.body.get("stop") if isinstance(request.body, dict) else None
        if self.honour_stop and stops and step.status == 200 and step.fault is None:
            listed = [stops] if isinstance(stops, str) else [s for s in stops if isinstance(s, str)]
            text, matched = cut_at_stop(step.text, listed)
            if matched is not None:
                step = FakeReply(text=text, finish_reason="stop", stop_reason=matched, latency=step.latency,
                                 usage=step.usage)
        return step

    def _context_error(self, request: ReceivedRequest) -> FakeReply | None:
        """OpenAI's 400 for a request that does not fit ``context_tokens`` (None: it fits)."""
        if self.context_tokens is None:
            return None
        prompt = self._prompt_tokens(request)
        limit = request.body.get("max_tokens") if isinstance(request.body, dict) else None
        asked = limit if isinstance(limit, int) else 0
        if prompt + asked <= self.context_tokens:
            return None
        head = f"This model's maximum context length is {self.context_tokens} tokens. However, "
        if asked:
            message = (f"{head}you requested {prompt + asked} tokens ({prompt} in the messages, {asked} in the "
                       "completion). Please reduce the length of the messages or completion.")
        else:
            message = f"{head}your messages resulted in {prompt} tokens. Please reduce the length of the messages."
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                     "param": "messages", "code": "context_length_exceeded"}})
        return status(400, body=body)

    @staticmethod
    def _prompt_tokens(request: ReceivedRequest) -> int:
        return sum(_count(str(m.get("content", ""))) for m in request.messages)

    async def _answer(self, request: ReceivedRequest, step: FakeReply, out: ResponseWriter) -> None:
        if step.fault == "reset":
            out.reset()
        elif step.fault == "stall":
            await asyncio.sleep(step.seconds)
            out.close()
        elif step.fault == "raw":
            await out.send(step.status, step.raw, step.content_type, dict(step.headers))
        elif step.fault == "flood":
            await self._flood(request, step, out)
        elif step.status != 200:
            headers = {} if step.retry_after is None else {"retry-after": str(step.retry_after)}
            body = step.body.encode() if step.body is not None else _error_body(
                f"scripted status {step.status}"
            )
            await out.send(step.status, body, headers=headers)
        elif request.stream:
            await self._answer_stream(request, step, out)
        else:
            await self._answer_json(request, step, out)

    async def _answer_json(
        self, request: ReceivedRequest, step: FakeReply, out: ResponseWriter
    ) -> None:
        if step.fault == "garbage":
            await out.send(200, b"<html>this is not json</html>")
            return
        body = _dumps(self._completion(request, step))
        if step.fault == "no_terminator":
            await out.send(200, body[: len(body) // 2])
        elif step.fault == "drip":
            await out.start_chunked(200, "application/json")
            filler = b" " if step.forever else b""
            data = body if not step.forever else b""
            while True:
                for byte in data or filler:
                    await out.chunk(bytes([byte]))
                    await asyncio.sleep(step.seconds)
                if not step.forever:
                    break
            await out.end_chunked()
        else:
            await out.send(200, body)

    async def _answer_stream(
        self, request: ReceivedRequest, step: FakeReply, out: ResponseWriter
    ) -> None:
        await out.start_chunked(200, "text/event-stream", {"cache-control": "no-cache"})
        if step.fault == "garbage":
            await out.chunk(b"data: {this is not json\n\n")
            await out.end_chunked()
            return
        if step.fault == "drip" and step.forever:
            while True:
                await out.chunk(b": keep-alive\n\n")
                await asyncio.sleep(step.seconds)
        complete = step.fault != "no_terminator"
        for event in self._sse_events(request, step, complete):
            if step.fault == "drip":
                for byte in event:
                    await out.chunk(bytes([byte]))
                    await asyncio.sleep(step.seconds)
            else:
                await out.chunk(event)
        await out.end_chunked()

    async def _flood(self, request: ReceivedRequest, step: FakeReply, out: ResponseWriter) -> None:
        if request.stream:
            await out.start_chunked(200, "text/event-stream")
            data = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": step.text}}]}
            event = b"data: " + _dumps(data) + b"\n\n"
        else:
            await out.start_chunked(200, "application/json")
            await out.chunk(b'{"object": "chat.completion", "choices": [{"message": {"content": "')
            event = step.text.encode()
        while True:  # until the client goes away
            await out.chunk(event * 16)

    # payloads --------------------------------------------------------------
    def _new_id(self) -> str:
        self._ids += 1
        return f"chatcmpl-fake-{self._ids}"

    def _usage(self, request: ReceivedRequest, step: FakeReply) -> JSONObject:
        prompt, completion = step.usage or (self._prompt_tokens(request), _count(step.text))
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}

    def _completion(self, request: ReceivedRequest, step: FakeReply) -> JSONObject:
        return {
            "id": self._new_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": step.text},
                "finish_reason": step.finish_reason,
                **({"stop_reason": step.stop_reason} if step.stop_reason is not None else {}),
            }],
            "usage": self._usage(request, step),
        }

    def _sse_events(self, request: ReceivedRequest, step: FakeReply, complete: bool) -> list[bytes]:
        cid, created = self._new_id(), int(time.time())

        def chunk(delta: JSONObject, finish: str | None) -> bytes:
            choice: JSONObject = {"index": 0, "delta": delta, "finish_reason": finish}
            if finish is not None and step.stop_reason is not None:
                choice["stop_reason"] = step.stop_reason
            data = {"id": cid, "object": "chat.completion.chunk", "created": created,
                    "model": self.model, "choices": [choice]}
            return b"data: " + _dumps(data) + b"\n\n"

        events = [chunk({"role": "assistant", "content": ""}, None)]
        text = step.text
        events += [chunk({"content": text[i:i + 4]}, None) for i in range(0, len(text), 4)]
        if complete:
            events.append(chunk({}, step.finish_reason))
            options = request.body.get("stream_options") if isinstance(request.body, dict) else None
            if isinstance(options, dict) and options.get("include_usage"):
                data = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": self.model,
                        "choices": [], "usage": self._usage(request, step)}
                events.append(b"data: " + _dumps(data) + b"\n\n")
            events.append(b"data: [DONE]\n\n")
        return events


def _dumps(data: JSONObject) -> bytes:
    """``data`` as JSON bytes: orjson's, or json's for what orjson refuses (a scripted
    text with a lone surrogate is sent escaped, as json writes it)."""
    try:
        return orjson.dumps(data)
    except TypeError:
        return json.dumps(data).encode()


def _error_body(message: str, code: str = "upstream_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": code, "code": None}}).encode()
