"""The async upstream seam: aiohttp by default, httpx when a caller brings its own transport."""

from __future__ import annotations

import asyncio
import json
import socket

import aiohttp
import httpx
import pytest

from agentfsm.backends._aio_transport import _as_httpx, _env_proxy
from agentfsm.backends.openai_compat import OpenAICompatBackend
from agentfsm.core.backend import GenerationOptions
from agentfsm.core.errors import BackendConnectionError
from agentfsm.core.messages import PromptMessage

PROMPT = [PromptMessage(role="user", content="hi")]


def _answer(text: str) -> dict[str, object]:
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def test_async_transport_goes_through_httpx() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=_answer("from the mock"))

    async def go() -> str:
        backend = OpenAICompatBackend(
            "http://upstream.test/v1", "m", api_key="sk-test", async_transport=httpx.MockTransport(handler)
        )
        try:
            return (await backend.acomplete(PROMPT, GenerationOptions(max_tokens=8))).text
        finally:
            await backend.aclose()

    assert asyncio.run(go()) == "from the mock"
    assert str(seen[0].url) == "http://upstream.test/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert json.loads(seen[0].content)["messages"] == [{"role": "user", "content": "hi"}]


def test_refused_connection_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there

    async def go() -> None:
        backend = OpenAICompatBackend(f"http://127.0.0.1:{port}/v1", "m", max_retries=0)
        try:
            await backend.acomplete(PROMPT, GenerationOptions(max_tokens=8))
        finally:
            await backend.aclose()

    with pytest.raises(BackendConnectionError):
        asyncio.run(go())


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (aiohttp.ConnectionTimeoutError("slow"), httpx.ConnectTimeout),
        (aiohttp.SocketTimeoutError("drip"), httpx.ReadTimeout),
        (asyncio.TimeoutError(), httpx.ReadTimeout),
        (aiohttp.ServerDisconnectedError(), httpx.RemoteProtocolError),
        (aiohttp.ClientPayloadError("cut"), httpx.RemoteProtocolError),
        (ConnectionResetError("reset"), httpx.ReadError),
        (aiohttp.ClientError("other"), httpx.TransportError),
    ],
)
def test_aiohttp_errors_keep_their_httpx_meaning(error: BaseException, expected: type[Exception]) -> None:
    mapped = _as_httpx(error)
    assert type(mapped) is expected


def test_environment_proxy_is_read_for_the_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://user:pw@127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "skipped.test")
    url, auth = _env_proxy("http://upstream.test/v1")
    assert str(url) == "http://127.0.0.1:3128" and auth is not None and auth.login == "user"
    assert _env_proxy("http://skipped.test/v1") == (None, None)


def test_the_default_pool_sends_compact_utf8_json_and_options_refuse_nan() -> None:
    from agentfsm.testing import FakeUpstream

    async def go(base: str) -> str:
        backend = OpenAICompatBackend(base, "m", api_key="sk-test")
        try:
            prompt = [PromptMessage(role="user", content="Grüße, 東京")]
            return (await backend.acomplete(prompt, GenerationOptions(max_tokens=8, temperature=0.5))).text
        finally:
            await backend.aclose()

    with FakeUpstream(["ok"]) as fake:
        assert asyncio.run(go(fake.base_url)) == "ok"
        body = fake.chat_requests[0].body
    assert body["messages"] == [{"role": "user", "content": "Grüße, 東京"}]
    assert body["temperature"] == 0.5
    with pytest.raises(ValueError, match="finite number"):
        GenerationOptions(temperature=float("nan"))
