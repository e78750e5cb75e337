"""OpenAICompatBackend against a real HTTP server on 127.0.0.1 that misbehaves on cue.

Every fault ends in a typed error or a retried success; a hang is impossible
because the backend's own total timeout raises BackendTimeout.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from agentfsm.backends import GenerationOptions, OpenAICompatBackend, Timeouts
from agentfsm.core.backend import TextStream, Usage
from agentfsm.core.messages import PromptMessage
from agentfsm.core.errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendProtocolError,
    BackendTimeout,
    MaxTokensTooLarge,
    PromptTooLong,
    UsageError,
)
from agentfsm.testing import (
    FakeReply,
    FakeUpstream,
    ReceivedRequest,
    drip,
    garbage,
    reset,
    stall,
    status,
    stream_no_terminator,
)
from tests._fake import MESSAGES, MODES, OPTIONS, call

FAST = Timeouts(connect=2.0, read=2.0, total=5.0)


def backend_for(fake: FakeUpstream, **kwargs: object) -> OpenAICompatBackend:
    options: dict[str, object] = {"timeout": FAST, "backoff": 0.01, "api_key": "sk-test"}
    options.update(kwargs)
    return OpenAICompatBackend(fake.base_url, "fake-model", **options)  # type: ignore[arg-type]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(
    ("script", "attempts"),
    [
        pytest.param([reset(), "recovered"], 2, id="reset-then-ok"),
        pytest.param([status(429, retry_after=0.05), "recovered"], 2, id="429-retry-after"),
        pytest.param([status(500), status(503), "recovered"], 3, id="5xx-twice"),
        pytest.param([status(408), status(409), "recovered"], 3, id="408-409"),
        pytest.param([stall(0.05), "recovered"], 2, id="stall-then-close"),
    ],
)
def test_transient_faults_are_retried_to_success(
    script: list[FakeReply | str], attempts: int, mode: str
) -> None:
    with FakeUpstream(script) as fake, backend_for(fake, retry_after_cap=0.05) as backend:
        assert call(backend, mode) == "recovered"
        assert len(fake.chat_requests) == attempts


@pytest.mark.parametrize(
    ("script", "error", "attempts"),
    [
        pytest.param([reset()] * 5, BackendConnectionError, 4, id="reset-forever"),
        pytest.param([status(500)] * 5, BackendHTTPError, 4, id="500-forever"),
        pytest.param([status(400)], BackendHTTPError, 1, id="400-not-retried"),
        pytest.param([status(401)], BackendHTTPError, 1, id="401-not-retried"),
        pytest.param([garbage()], BackendProtocolError, 1, id="garbage"),
        pytest.param([stream_no_terminator("half an ans")], BackendProtocolError, 1, id="no-terminator"),
    ],
)
def test_persistent_faults_raise_typed_errors(
    script: list[FakeReply | str], error: type[BackendError], attempts: int, mode: str
) -> None:
    with FakeUpstream(script) as fake, backend_for(fake, max_retries=3) as backend:
        with pytest.raises(error):
            call(backend, mode)
        assert len(fake.chat_requests) == attempts


def test_http_error_carries_status_and_body(mode: str) -> None:
    with FakeUpstream([status(418, body="short and stout")]) as fake, backend_for(fake) as backend:
        with pytest.raises(BackendHTTPError) as info:
            call(backend, mode)
    assert (info.value.status_code, info.value.body) == (418, "short and stout")


def test_retry_after_past_the_cap_gives_up_at_once_and_says_how_long(mode: str) -> None:
    script: list[FakeReply | str] = [status(429, retry_after=30), "never served"]
    with FakeUpstream(script) as fake, backend_for(fake, retry_after_cap=0.05) as backend:
        with pytest.raises(BackendHTTPError) as info:
            call(backend, mode)
        assert (info.value.status_code, info.value.retry_after) == (429, 30.0)
        assert len(fake.chat_requests) == 1


def test_retry_after_past_the_deadline_gives_up_at_once(mode: str) -> None:
    script: list[FakeReply | str] = [status(429, retry_after=60), "never served"]
    timeouts = Timeouts(connect=1.0, read=1.0, total=2.0)
    with FakeUpstream(script) as fake, backend_for(fake, timeout=timeouts, retry_after_cap=60) as backend:
        with pytest.raises(BackendHTTPError) as info:
            call(backend, mode)
        assert info.value.status_code == 429
        assert len(fake.chat_requests) == 1


def test_stall_beyond_read_timeout_raises_timeout(mode: str) -> None:
    timeouts = Timeouts(connect=1.0, read=0.2, total=5.0)
    with FakeUpstream([stall(30)]) as fake, backend_for(fake, timeout=timeouts) as backend:
        with pytest.raises(BackendTimeout):
            call(backend, mode)


@pytest.mark.parametrize("forever", [False, True], ids=["slow-body", "filler-forever"])
def test_drip_is_bounded_by_the_total_timeout(mode: str, forever: bool) -> None:
    # each byte arrives well within the read timeout: only the total deadline can stop it
    timeouts = Timeouts(connect=1.0, read=5.0, total=0.5)
    script = [drip(0.02, "x" * 2000, forever=forever)]
    with FakeUpstream(script) as fake, backend_for(fake, timeout=timeouts) as backend:
        with pytest.raises(BackendTimeout, match="total timeout"):
            call(backend, mode)


def test_unreachable_upstream_raises_connection_error(mode: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = OpenAICompatBackend(
        f"http://127.0.0.1:{port}/v1", "m", api_key="", timeout=FAST, backoff=0.01, max_retries=1
    )
    with backend, pytest.raises(BackendConnectionError):
        call(backend, mode)


def test_stream_yields_several_deltas() -> None:
    text = "a reply long enough to come in several deltas"
    with FakeUpstream([text]) as fake, backend_for(fake) as backend:
        deltas = list(backend.stream(MESSAGES, OPTIONS))
    assert len(deltas) > 3
    assert "".join(deltas) == text
    assert fake.chat_requests[0].stream


def test_complete_reports_usage_finish_reason_and_model() -> None:
    with FakeUpstream([FakeReply(text="cut sho", finish_reason="length")]) as fake:
        with backend_for(fake) as backend:
            completion = backend.complete(MESSAGES, OPTIONS)
    assert completion.finish_reason == "length"
    assert completion.model == "fake-model"
    assert completion.usage.completion_tokens > 0 and completion.usage.prompt_tokens > 0


def test_request_body_is_bounded_and_complete() -> None:
    options = GenerationOptions(max_tokens=7, temperature=0.3, seed=11, stop=("STOP",))
    with FakeUpstream(["ok"]) as fake, backend_for(fake, extra_body={"top_k": 1}) as backend:
        backend.complete(MESSAGES, options)
    body = fake.chat_requests[0].body
    assert body == {
        "model": "fake-model",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "max_tokens": 7,
        "temperature": 0.3,
        "seed": 11,
        "stop": ["STOP"],
        "stream": False,
        "top_k": 1,
    }


def test_prefill_is_sent_as_a_trailing_assistant_turn_when_declared() -> None:
    options = GenerationOptions(prefill="```json action\n")
    with FakeUpstream(['{"tool": "x"}']) as fake, backend_for(fake, prefill=True) as backend:
        assert backend.capabilities.prefill
        backend.complete(MESSAGES, options)
    assert fake.chat_requests[0].messages[-1] == {"role": "assistant", "content": "```json action\n"}


def test_prefill_on_an_undeclared_upstream_is_a_usage_error() -> None:
    with FakeUpstream(["ok"]) as fake, backend_for(fake) as backend:
        with pytest.raises(UsageError):
            backend.complete(MESSAGES, GenerationOptions(prefill="{"))
        assert fake.chat_requests == []


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def llama_server_like(request: ReceivedRequest) -> FakeReply | str:
    """Rejects OpenAI's json_schema response_format the way llama-cpp-python's server does."""
    if request.body.get("response_format", {}).get("type") == "json_schema":
        return status(500, body="Input should be 'text' or 'json_object': response_format.type")
    return '{"a": 1}'


def test_auto_schema_mode_falls_back_once_and_remembers(mode: str) -> None:
    options = GenerationOptions(json_schema=SCHEMA)
    with FakeUpstream(llama_server_like) as fake, backend_for(fake) as backend:
        assert call(backend, mode, options) == '{"a": 1}'
        assert call(backend, mode, options) == '{"a": 1}'
    sent = [r.body["response_format"]["type"] for r in fake.chat_requests]
    assert sent == ["json_schema", "json_object", "json_object"]
    assert fake.chat_requests[-1].body["response_format"]["schema"] == SCHEMA


def test_explicit_schema_modes() -> None:
    options = GenerationOptions(json_schema=SCHEMA)
    with FakeUpstream(['{"a": 1}'] * 2) as fake:
        with backend_for(fake, json_schema_mode="json_schema") as backend:
            backend.complete(MESSAGES, options)
        with backend_for(fake, json_schema_mode="json_object") as backend:
            backend.complete(MESSAGES, options)
    first, second = (r.body["response_format"] for r in fake.chat_requests)
    assert first["json_schema"]["schema"] == SCHEMA and first["type"] == "json_schema"
    assert second == {"type": "json_object", "schema": SCHEMA}


def test_schema_mode_json_schema_does_not_fall_back() -> None:
    options = GenerationOptions(json_schema=SCHEMA)
    with FakeUpstream(llama_server_like) as fake:
        with backend_for(fake, json_schema_mode="json_schema", max_retries=0) as backend:
            with pytest.raises(BackendHTTPError):
                backend.complete(MESSAGES, options)


def test_schema_mode_off_declares_no_schema_support() -> None:
    backend = OpenAICompatBackend("http://127.0.0.1:9/v1", "m", json_schema_mode="off")
    assert not backend.capabilities.json_schema
    with pytest.raises(UsageError):
        backend.complete(MESSAGES, GenerationOptions(json_schema=SCHEMA))


@pytest.mark.parametrize("kwargs", [{"json_schema_mode": "grammar"}, {"max_retries": -1}])
def test_bad_configuration_is_a_usage_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        OpenAICompatBackend("http://127.0.0.1:9/v1", "m", **kwargs)  # type: ignore[arg-type]


def test_list_models_and_name() -> None:
    with FakeUpstream(model="served-model") as fake, backend_for(fake) as backend:
        assert backend.list_models() == ["served-model"]
        assert backend.name == "openai:fake-model"


async def test_async_pool_serves_concurrent_calls() -> None:
    import asyncio

    from agentfsm.testing import latency

    with FakeUpstream(lambda request: latency(0.2, "done")) as fake:
        async with backend_for(fake) as backend:
            texts = await asyncio.gather(*(backend.acomplete(MESSAGES, OPTIONS) for _ in range(16)))
    assert [c.text for c in texts] == ["done"] * 16
    assert fake.peak_in_flight > 1


@pytest.fixture
def many_resets() -> Iterator[FakeUpstream]:
    with FakeUpstream([reset()] * 3 + ["fine"]) as fake:
        yield fake


def test_max_retries_zero_does_not_retry(many_resets: FakeUpstream) -> None:
    with backend_for(many_resets, max_retries=0) as backend, pytest.raises(BackendConnectionError):
        backend.complete(MESSAGES, OPTIONS)
    assert len(many_resets.chat_requests) == 1


# -- limits the upstream says, usage it reports ------------------------------------------


def test_no_max_tokens_sends_none(mode: str) -> None:
    """No limit of ours: the upstream's own bound applies (512 was sent before)."""
    with FakeUpstream(["hello"]) as fake, backend_for(fake) as backend:
        assert call(backend, mode, GenerationOptions(max_tokens=None)) == "hello"
    assert "max_tokens" not in fake.chat_requests[0].body


def test_a_max_tokens_the_context_cannot_hold_is_sent_again_as_what_is_left(mode: str) -> None:
    with FakeUpstream(["hello", "again"], context_tokens=1000) as fake, backend_for(fake) as backend:
        assert backend.capabilities.context_tokens is None
        assert call(backend, mode, GenerationOptions(max_tokens=128000)) == "hello"
        # the context the upstream reported is the backend's now: the proxy fits to it
        assert backend.capabilities.context_tokens == 1000
    first, second = (r.body["max_tokens"] for r in fake.chat_requests)
    prompt = sum(max(1, len(m.content) // 4) for m in MESSAGES)
    assert (first, second) == (128000, 1000 - prompt)


def test_a_prompt_the_context_cannot_hold_is_prompt_too_long_with_its_own_numbers(mode: str) -> None:
    long = (PromptMessage(role="user", content="word " * 1000),)
    with FakeUpstream([], context_tokens=100) as fake, backend_for(fake) as backend:
        with pytest.raises(PromptTooLong) as caught:
            call(backend, mode, GenerationOptions(max_tokens=10), messages=long)
    assert not isinstance(caught.value, MaxTokensTooLarge)
    assert (caught.value.tokens, caught.value.maximum) == (1250, 100)
    assert len(fake.chat_requests) == 1


@pytest.mark.parametrize("digits", [20, 5000])
def test_a_context_error_with_impossible_counts_is_prompt_too_long_without_them(mode: str, digits: int) -> None:
    # a hostile upstream's 20-digit count was fitted to (the context learned, max_tokens sent
    # again from it); counts are read up to 12 digits, past a 4 KB head never (issue 29)
    huge = "9" * digits
    bodies = [
        f"This model's maximum context length is {huge} tokens. However, you requested 5 tokens "
        "(3 in the messages, 2 in the completion)",
        '{"error": {"message": "exceeds the available context size", "n_prompt_tokens": ' + huge + ', "n_ctx": 100}}',
    ]
    for body in bodies:
        with FakeUpstream([status(400, body=body)]) as fake, backend_for(fake, max_retries=0) as backend:
            with pytest.raises(PromptTooLong) as caught:
                call(backend, mode, GenerationOptions(max_tokens=10))
            assert (caught.value.tokens, caught.value.maximum) == (None, None)
            assert backend.capabilities.context_tokens is None
        assert len(fake.chat_requests) == 1


def test_streams_ask_for_the_upstreams_usage() -> None:
    async def run(backend: OpenAICompatBackend) -> TextStream:
        stream = backend.astream(MESSAGES, OPTIONS)
        assert isinstance(stream, TextStream)
        assert "".join([d async for d in stream]) == "sunny and warm"
        await backend.aclose()
        return stream

    with FakeUpstream(["sunny and warm"]) as fake, backend_for(fake) as backend:
        ended = asyncio.run(run(backend))
    assert fake.chat_requests[0].body["stream_options"] == {"include_usage": True}
    prompt = sum(max(1, len(m.content) // 4) for m in MESSAGES)
    assert ended.usage == Usage(prompt_tokens=prompt, completion_tokens=3)  # the upstream's own count


def rejects_stream_options(request: ReceivedRequest) -> FakeReply | str:
    if "stream_options" in request.body:
        return status(400, body='{"error": {"message": "Unrecognized request argument: stream_options"}}')
    return "ok"


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_an_upstream_that_refuses_stream_options_is_asked_without_them_once(mode: str) -> None:
    with FakeUpstream(rejects_stream_options) as fake, backend_for(fake, max_retries=0) as backend:
        assert call(backend, mode) == "ok"
        assert call(backend, mode) == "ok"
    sent = ["stream_options" in r.body for r in fake.chat_requests]
    assert sent == [True, False, False]


# --- the base URL: credentials refused at start-up, a query kept (issue 29, item 12) ----------


@pytest.mark.parametrize("url", ["http://user:s3cret-pw@127.0.0.1:9/v1", "http://user@127.0.0.1:9/v1"])
def test_a_base_url_with_a_user_or_password_is_refused_without_showing_it(url: str) -> None:
    # defect: every request was a 500 and the password was in every DEBUG line
    with pytest.raises(UsageError, match="user name or password") as caught:
        OpenAICompatBackend(url, "m", api_key="sk-test")
    assert "s3cret" not in str(caught.value) and "user@" not in str(caught.value)


def test_serve_refuses_a_base_url_with_credentials_at_start_up() -> None:
    from typer.testing import CliRunner

    from agentfsm.cli import app

    result = CliRunner().invoke(
        app, ["serve", "--backend", "openai", "--base-url", "http://u:s3cret-pw@127.0.0.1:9/v1", "--upstream-api-key", "sk-x"]
    )
    assert result.exit_code == 2
    assert "user name or password" in result.output and "s3cret" not in result.output


def test_the_query_of_the_base_url_goes_with_every_request(mode: str) -> None:
    # defect: '?api-version=...' was glued into the path (…/v1?api-version=x/chat/completions)
    with FakeUpstream(["ok"]) as fake:
        with OpenAICompatBackend(fake.base_url + "?api-version=2024-10-21", "m", api_key="sk-test", timeout=FAST) as backend:
            assert call(backend, mode) == "ok"
        sent = fake.chat_requests[0]
        assert sent.path == "/v1/chat/completions" and sent.query == "api-version=2024-10-21"
        assert backend.base_url == fake.base_url


def test_the_query_of_the_base_url_goes_with_httpx_async_requests_too() -> None:
    import httpx

    with FakeUpstream(["ok"]) as fake:
        backend = OpenAICompatBackend(
            fake.base_url + "/?api-version=1&x=2", "m", api_key="sk-test", timeout=FAST,
            async_transport=httpx.AsyncHTTPTransport(),
        )
        assert call(backend, "acomplete") == "ok"
        assert fake.chat_requests[0].query == "api-version=1&x=2"
