"""A backend for any OpenAI-compatible chat endpoint (httpx when blocking, aiohttp when async).

Ollama, vLLM, llama.cpp's server, ``python -m llama_cpp.server``, LM Studio, hosted
chat APIs. Sync and async clients with connection pooling; transport retries with
tenacity on connection errors and 408/409/429/5xx (honouring ``Retry-After``; one
longer than ``retry_after_cap`` or the time left is raised at once, not waited for); a total deadline per call that bounds even a dripping upstream;
SSE streaming. The API key goes into the ``Authorization`` header and nowhere else:
not into logs, exception messages or reprs.

JSON-schema constrained output: ``json_schema_mode="auto"`` sends OpenAI's
``response_format: {"type": "json_schema"}`` and, if the upstream rejects it (as
llama-cpp-python's server does), falls back once to
``{"type": "json_object", "schema": ...}`` and remembers that for this instance.

Streamed requests ask for the upstream's usage (``stream_options.include_usage``); an
upstream that refuses the field is asked again without it, and never again. A
``max_tokens`` the upstream says does not fit its context beside the prompt ("6758 in
the messages, 128000 in the completion") is sent again as what the context leaves (the
completion says so: ``max_tokens_sent``), and the context it reported becomes :attr:`capabilities`' ``context_tokens``, so that the
proxy fits later requests before sending them.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx
from loguru import logger
from pydantic import SecretStr

from agentfsm.core._types import JSONObject
from agentfsm.backends._body import ACCEPT_ENCODING, MODELS_LIMIT, BoundedBody, aread_body, raw_of, read_body, reply_limit
from agentfsm.backends._openai_attempts import ChatAttempts, Rejected, awith_fallback, max_tokens_sent, with_fallback
from agentfsm.backends._payload import JSONSchemaMode, build_payload, response_format_schema
from agentfsm.backends._sse import ChatStreamState, SSEDecoder, parse_chat_completion
from agentfsm.backends._upstream import AsyncUpstream, HttpxUpstream, UpstreamResponse
from agentfsm.backends._transport import (
    KEY_NOT_SENDABLE,
    CallState,
    RetryPolicy,
    Timeouts,
    bounded,
    key_sendable,
    map_transport_error,
    split_base_url,
    url_secrets,
)
from agentfsm.core.backend import Capabilities, Completion, GenerationOptions, TextStream
from agentfsm.core.errors import BackendError, BackendHTTPError, MaxTokensTooLarge, UsageError
from agentfsm.core.redaction import Redactor
from agentfsm.core.messages import PromptMessage

__all__ = ["JSONSchemaMode", "OpenAICompatBackend", "Timeouts", "split_base_url"]

def _sent_limit(completion: Completion, asked: JSONObject, sent: JSONObject) -> Completion:
    """``completion``, saying the ``max_tokens`` sent when a fallback lowered the one asked."""
    lowered = max_tokens_sent(asked, sent)
    return completion if lowered is None else completion.model_copy(update={"max_tokens_sent": lowered})


def _env_key() -> str | None:
    return os.environ.get("AGENTFSM_UPSTREAM_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


class OpenAICompatBackend:
    """Chat completions from an OpenAI-compatible HTTP upstream.

    ``api_key`` defaults to ``$AGENTFSM_UPSTREAM_API_KEY``, then ``$OPENAI_API_KEY``.
    ``prefill=True`` declares that the upstream continues a trailing assistant
    message (a property of the server, so it is opt-in). ``extra_body`` is merged
    into every request body. ``backoff`` is the first wait between retries when the
    upstream gives no ``Retry-After`` (doubling, jittered). ``context_tokens`` declares
    the upstream model's context window (the proxy then fits requests to it; unknown by
    default). An upstream's own "context length exceeded" 400 is raised as
    :class:`~agentfsm.core.errors.PromptTooLong`. ``transport`` replaces the blocking
    client's httpx transport; ``async_transport`` (an httpx one, e.g. ``MockTransport``)
    makes the async calls go through ``httpx.AsyncClient`` instead of the default aiohttp pool.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: Timeouts | None = None,
        max_retries: int = 3,
        retry_after_cap: float = 10.0,
        backoff: float = 0.5,
        json_schema_mode: JSONSchemaMode = "auto",
        prefill: bool = False,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_connections: int = 100,
        context_tokens: int | None = None,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if json_schema_mode not in ("auto", "json_schema", "json_object", "off"):
            raise UsageError(f"unknown json_schema_mode {json_schema_mode!r}")
        if max_retries < 0:
            raise UsageError("max_retries must be >= 0")
        #: without its query, whose parameters go with every request (``_params``)
        self.base_url, self._params = split_base_url(base_url)
        self.model = model
        self.timeouts = timeout or Timeouts()
        self.json_schema_mode: JSONSchemaMode = json_schema_mode
        #: the form actually sent; ``auto`` starts as json_schema and may fall back once
        self._schema_form: JSONSchemaMode = (
            "json_schema" if json_schema_mode == "auto" else json_schema_mode
        )
        self._prefill = prefill
        if context_tokens is not None and context_tokens < 1:
            raise UsageError("context_tokens must be positive")
        self.context_tokens = context_tokens
        self._policy = RetryPolicy(
            max_retries=max_retries, retry_after_cap=retry_after_cap, backoff=backoff
        )
        # a SecretStr shows as '**********' in reprs, vars() and tracebacks' locals
        raw_key = api_key if api_key is not None else _env_key()
        if raw_key and not key_sendable(raw_key):  # else every request fails, a 500 with a traceback
            raise UsageError(KEY_NOT_SENDABLE)
        self._key = SecretStr(raw_key) if raw_key else None
        #: the key, and a credential in the base URL's query (``?code=``), in every form an
        #: upstream may echo them (escaped, URL-encoded ...)
        self._redact = Redactor([raw_key, *url_secrets(base_url)])
        # only what backends._body decodes within the reply's bound
        self._headers = {"accept": "application/json", "accept-encoding": ACCEPT_ENCODING, **(extra_headers or {})}
        self._extra_body = dict(extra_body or {})
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._transport = transport
        self._async_transport = async_transport
        self._client: httpx.Client | None = None
        self._aclient: AsyncUpstream | None = None
        #: two threads' first runs make one aiohttp pool, not one each (one would leak)
        self._aclient_lock = threading.Lock()
        self._aclient_loop: asyncio.AbstractEventLoop | None = None
        self._capabilities: tuple[tuple[bool, bool, int | None], Capabilities] | None = None
        #: the context an upstream reported in a "does not fit" error (when none was declared)
        self._reported_context: int | None = None
        #: streamed requests ask for the usage chunk until the upstream refuses that once
        self._stream_usage = True
        self._attempts = ChatAttempts(
            self.base_url, model, self.timeouts, falls_back=json_schema_mode == "auto",
            redact=self._redact, client=self._sync_client, aclient=self._async_client,
        )

    # -- the Backend protocol ------------------------------------------------
    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self.model}"

    @property
    def max_connections(self) -> int:
        """The size of the connection pool to the upstream (one per request at once)."""
        return self._limits.max_connections or 0

    @property
    def capabilities(self) -> Capabilities:
        """Prefill as declared; JSON schema unless ``json_schema_mode="off"``; the context
        as declared (``context_tokens``), else as the upstream reported it in a "does not
        fit" error, else unknown."""
        key = (self._prefill, self.json_schema_mode != "off", self.context_tokens or self._reported_context)
        if self._capabilities is None or self._capabilities[0] != key:
            # read several times per request: built again only when what it reads changed
            prefill, json_schema, context_tokens = key
            caps = Capabilities(prefill=prefill, json_schema=json_schema, context_tokens=context_tokens)
            self._capabilities = (key, caps)
        return self._capabilities[1]

    def complete(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Completion:
        """One chat completion (retried on transport failures, bounded by ``timeout.total``)."""
        call = CallState(self.timeouts.total)
        asked = self._payload(messages, options, False)
        completion, sent = with_fallback(
            lambda payload: self._policy.sync(call)(self._attempts.complete, payload, call), asked, self._fall_back,
        )
        return _sent_limit(completion, asked, sent)

    async def acomplete(
        self, messages: Sequence[PromptMessage], options: GenerationOptions
    ) -> Completion:
        """Async twin of :meth:`complete`."""
        call = CallState(self.timeouts.total)

        async def run(payload: JSONObject) -> Completion:
            return await self._policy.arun(call, self._attempts.acomplete, payload, call)

        asked = self._payload(messages, options, False)
        completion, sent = await awith_fallback(run, asked, self._fall_back)
        return _sent_limit(completion, asked, sent)

    def stream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> Iterator[str]:
        """Text deltas over SSE; BackendProtocolError if the stream is cut short."""
        call = CallState(self.timeouts.total)
        response, _ = with_fallback(
            lambda payload: self._policy.sync(call)(self._attempts.open_stream, payload, call),
            self._payload(messages, options, True), self._fall_back,
        )
        limit = reply_limit(options.max_tokens, stream=True)
        try:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                yield parse_chat_completion(read_body(response, call, limit), self._redact).text
                return
            decoder, state = SSEDecoder(), ChatStreamState(self._redact)
            headers, chunks = raw_of(response)
            body = BoundedBody(headers, limit)
            try:
                for raw in chunks:
                    for data in decoder.feed(body.feed(raw)):
                        if delta := state.accept(data):
                            yield delta
                    call.check()
            except httpx.HTTPError as exc:
                raise map_transport_error(exc, self._redact) from exc
            for data in [*decoder.feed(body.close()), *decoder.close()]:
                if delta := state.accept(data):
                    yield delta
            state.finish()
        finally:
            response.close()

    def astream(self, messages: Sequence[PromptMessage], options: GenerationOptions) -> AsyncIterator[str]:
        """Async twin of :meth:`stream`; every wait is bounded by the call's deadline. The
        :class:`TextStream` reports the upstream's finish_reason, usage and stop sequence once read."""
        return TextStream(lambda end: self._astream(messages, options, end))

    async def _astream(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, end: TextStream
    ) -> AsyncIterator[str]:
        call = CallState(self.timeouts.total)

        async def run(payload: JSONObject) -> UpstreamResponse:
            return await self._policy.arun(call, self._attempts.aopen_stream, payload, call)

        asked = self._payload(messages, options, True)
        response, sent = await awith_fallback(run, asked, self._fall_back)
        end.max_tokens_sent = max_tokens_sent(asked, sent)
        limit = reply_limit(options.max_tokens, stream=True)
        try:
            if "text/event-stream" not in response.headers.get("content-type", ""):
                whole = parse_chat_completion(await aread_body(response, call, limit), self._redact)
                yield whole.text
                end.finish_reason, end.usage, end.stop_sequence = whole.finish_reason, whole.usage, whole.stop_sequence
                return
            decoder, state = SSEDecoder(), ChatStreamState(self._redact)
            body = BoundedBody(response.headers, limit)
            chunks = response.aiter_raw()
            try:
                while True:
                    try:
                        raw = await bounded(lambda: anext(chunks), call)
                    except StopAsyncIteration:
                        break
                    for data in decoder.feed(body.feed(raw)):
                        if delta := state.accept(data):
                            yield delta
            except httpx.HTTPError as exc:
                raise map_transport_error(exc, self._redact) from exc
            for data in [*decoder.feed(body.close()), *decoder.close()]:
                if delta := state.accept(data):
                    yield delta
            state.finish()
            end.finish_reason, end.stop_sequence = state.finish_reason, state.stop_sequence
            end.usage = state.usage if state.usage.total_tokens else None
        finally:
            await response.aclose()

    # -- other endpoints -------------------------------------------------------
    def list_models(self) -> list[str]:
        """The model ids the upstream lists at ``GET /models``."""
        call = CallState(self.timeouts.total)
        try:
            with self._sync_client().stream("GET", "models", timeout=call.httpx_timeout(self.timeouts)) as response:
                body = read_body(response, call, MODELS_LIMIT, cut=response.status_code >= 400)
        except httpx.HTTPError as exc:
            raise map_transport_error(exc, self._redact) from exc
        if response.status_code >= 400:
            raise BackendHTTPError(response.status_code, self._redact(body.decode("utf-8", "replace")))
        try:
            data = json.loads(body)
            return [str(item["id"]) for item in data["data"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise BackendError("upstream /models answer is not a model list") from exc

    # -- lifecycle ---------------------------------------------------------------
    def close(self) -> None:
        """Close the sync connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close both connection pools (the async one: this event loop's connections; the
        aiohttp pool keeps one per loop, so another thread's runs keep theirs)."""
        self.close()
        if self._aclient is not None:
            await self._aclient.aclose()
            if self._async_transport is not None:  # an httpx pool belongs to one loop
                self._aclient = None

    def __enter__(self) -> OpenAICompatBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> OpenAICompatBackend:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        key = "'***'" if self._key else "None"
        return f"OpenAICompatBackend(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    # -- requests ------------------------------------------------------------------
    def _client_headers(self) -> httpx.Headers:
        # httpx masks authorization in its own reprs; we keep the key out of ours
        headers = httpx.Headers(self._headers)
        if self._key:
            headers["authorization"] = f"Bearer {self._key.get_secret_value()}"
        return headers

    def _payload(
        self, messages: Sequence[PromptMessage], options: GenerationOptions, stream: bool
    ) -> JSONObject:
        return build_payload(
            self.model, messages, options, stream=stream, schema_form=self._schema_form,
            prefill=self._prefill, extra_body=self._extra_body, stream_usage=self._stream_usage,
        )

    def _fall_back(self, rejected: Rejected, sent: JSONObject) -> JSONObject | None:
        """The payload to send after the upstream refused a part of ``sent`` (None: none)."""
        if rejected.part == "max_tokens":
            error = rejected.error
            assert isinstance(error, MaxTokensTooLarge) and error.tokens is not None and error.maximum is not None
            # the upstream said its context: later requests are fitted to it by the proxy
            self._reported_context = error.maximum
            left = error.maximum - error.tokens
            logger.info(
                "upstream {}: max_tokens {} does not fit its {}-token context with {} prompt tokens; sending {}",
                self.base_url, error.max_tokens, error.maximum, error.tokens, left,
            )
            return {**sent, "max_tokens": left} if left > 0 else None
        if rejected.part == "stream_options":
            logger.info("upstream {} refused stream_options; streamed usage will be estimated", self.base_url)
            self._stream_usage = False
            return {k: v for k, v in sent.items() if k != "stream_options"}
        logger.info(
            "upstream {} rejected response_format json_schema (HTTP {}); using json_object+schema",
            self.base_url, rejected.error.status_code if isinstance(rejected.error, BackendHTTPError) else "?",
        )
        self._schema_form = "json_object"
        schema = response_format_schema(sent["response_format"])
        return {**sent, "response_format": {"type": "json_object", "schema": schema}}

    # -- connection pools (one attempt at a request: _openai_attempts) -----------------
    def _sync_client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                base_url=self.base_url + "/", headers=self._client_headers(), limits=self._limits,
                transport=self._transport, params=self._params,
            )
        return self._client

    def _async_client(self) -> AsyncUpstream:
        if self._async_transport is None:
            # aiohttp's pool follows the loop itself: a new loop gets new connections, and
            # those of a loop that has ended are let go without a warning (_aio_transport)
            if self._aclient is None:
                from agentfsm.backends._aio_transport import AioUpstream

                with self._aclient_lock:
                    if self._aclient is None:
                        keepalive = self._limits.keepalive_expiry
                        self._aclient = AioUpstream(
                            self.base_url, self._client_headers(), limit=self._limits.max_connections or 0,
                            keepalive=keepalive if keepalive is not None else 5.0, params=self._params,
                        )
            return self._aclient
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aclient_loop is not loop:
            # a pool belongs to one event loop; a new loop gets a new pool
            self._aclient = HttpxUpstream(httpx.AsyncClient(
                base_url=self.base_url + "/", headers=self._client_headers(), limits=self._limits,
                transport=self._async_transport, params=self._params,
            ))
            self._aclient_loop = loop
        return self._aclient
