"""Faults and safety: every client gets a protocol-valid ending, whatever the upstream does.

A fake upstream that stalls, resets, sends garbage, answers 500 or 429, drips bytes, or
never finishes its stream; the SDK must end with its own API error (an HTTP error in the
protocol's shape, or the protocol's error event mid-stream), never a hang, a reset, or a
clean end. Also: API keys, the body cap, client mistakes as 4xx, client disconnects,
the request timeout, transcripts, and the bind rule of ``agentfsm serve``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
import anthropic
import httpx
import openai
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam
from typer.testing import CliRunner

from agentfsm.server.auth import check_bind, is_loopback
from agentfsm.cli import app as cli_app
from agentfsm.core.errors import UsageError
from agentfsm.testing import (
    FakeReply,
    FakeUpstream,
    drip,
    garbage,
    reset,
    stall,
    status,
    stream_no_terminator,
)
from agentfsm.runtime.transcript import read_transcript
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, serve_command, upstream_backend, wait_idle

QUESTION = "weather in Paris?"
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": QUESTION}]
USER_ANTHROPIC: list[MessageParam] = [{"role": "user", "content": QUESTION}]

#: fault -> the HTTP statuses a client may see for it (when it fails before any event)
FAULTS: dict[str, tuple[Callable[[], FakeReply], set[int]]] = {
    "stall": (lambda: stall(30), {504}),
    "reset": (reset, {502}),
    "garbage": (garbage, {502}),
    "500": (lambda: status(500), {502}),
    "429": (lambda: status(429, retry_after=0), {429}),
    "drip": (lambda: drip(0.2, text="x" * 200), {504}),
    "no_terminator": (lambda: stream_no_terminator("partial answer"), {502}),
    "never_ends": (lambda: drip(0.05, forever=True), {504}),
}


@pytest.fixture(scope="module")
def faulty() -> Iterator[tuple[FakeUpstream, str]]:
    """One fake and one proxy for the whole matrix; each test enqueues its fault."""
    with FakeUpstream([]) as fake:
        with proxy(upstream_backend(fake, total=1.0, read=0.5), request_timeout=5.0) as url:
            yield fake, url


def _openai_outcome(url: str, stream: bool) -> openai.APIError:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=30) as client:
        with pytest.raises(openai.APIError) as info:
            result = client.chat.completions.create(
                model="m", messages=USER, tools=TOOLS_OPENAI, stream=stream
            )
            if stream:
                for _ in result:
                    pass
    return info.value


def _anthropic_outcome(url: str, stream: bool) -> anthropic.APIError:
    with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=30) as client:
        with pytest.raises(anthropic.APIError) as info:
            if stream:
                with client.messages.stream(model="m", max_tokens=64, messages=USER_ANTHROPIC, tools=TOOLS_ANTHROPIC) as s:
                    for _ in s:
                        pass
            else:
                client.messages.create(model="m", max_tokens=64, messages=USER_ANTHROPIC, tools=TOOLS_ANTHROPIC)
    return info.value


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_openai_client_gets_a_protocol_error(faulty: tuple[FakeUpstream, str], fault: str, stream: bool) -> None:
    fake, url = faulty
    make, statuses = FAULTS[fault]
    fake.enqueue(make())
    error = _openai_outcome(url, stream)
    # neither a transport failure nor a client-side timeout: the proxy answered properly
    assert not isinstance(error, openai.APIConnectionError)
    if isinstance(error, openai.APIStatusError):
        assert error.status_code in statuses
        assert set(error.response.json()["error"]) == {"message", "type", "param", "code"}
    else:  # the stream had started: it ended with `data: {"error": ...}`
        assert stream and error.message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_anthropic_client_gets_a_protocol_error(faulty: tuple[FakeUpstream, str], fault: str, stream: bool) -> None:
    fake, url = faulty
    make, statuses = FAULTS[fault]
    fake.enqueue(make())
    error = _anthropic_outcome(url, stream)
    assert not isinstance(error, anthropic.APIConnectionError)
    assert isinstance(error, anthropic.APIStatusError)
    body = error.body
    assert isinstance(body, dict) and body["type"] == "error" and set(body["error"]) == {"type", "message"}
    if error.status_code != 200:  # 200: the stream had started and ended with `event: error`
        assert error.status_code in statuses


def test_mid_stream_failure_is_an_error_event_not_a_clean_end(faulty: tuple[FakeUpstream, str]) -> None:
    fake, url = faulty
    # prose held until the reply is accepted (the default): nothing was sent, a plain 502
    fake.enqueue(stream_no_terminator("Some prose that streams before the upstream dies"))
    body = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": True}
    held = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    assert held.status_code == 502 and held.json()["error"]["type"] == "upstream_error"
    # live prose: it was sent, so the stream ends with the protocol's error event
    with proxy(upstream_backend(fake, total=1.0, read=0.5), request_timeout=5.0, stream_prose="live") as live:
        fake.enqueue(stream_no_terminator("Some prose that streams before the upstream dies"))
        lines: list[str] = []
        with httpx.stream("POST", f"{live}/v1/chat/completions", timeout=30, json=body) as response:
            assert response.status_code == 200
            lines = [line for line in response.iter_lines() if line]
        assert any('"content"' in line for line in lines)
        assert lines[-1].startswith("data: {\"error\"") and "data: [DONE]" not in lines
        fake.enqueue(stream_no_terminator("Some prose that streams before the upstream dies"))
        with httpx.stream("POST", f"{live}/v1/messages", timeout=30, json={
            "model": "m", "max_tokens": 64, "messages": USER_ANTHROPIC, "tools": TOOLS_ANTHROPIC, "stream": True,
        }) as response:
            lines = [line for line in response.iter_lines() if line]
        assert lines[-2] == "event: error" and "message_stop" not in "".join(lines)


# -- client disconnects and the request timeout ---------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_client_disconnect_cancels_the_upstream_call(stream: bool) -> None:
    with FakeUpstream([drip(0.02, forever=True)]) as fake:
        with proxy(upstream_backend(fake, total=60)) as url:
            with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=1.0) as c:
                with pytest.raises(openai.APITimeoutError):
                    result = c.chat.completions.create(
                        model="m", messages=USER, tools=TOOLS_OPENAI, stream=stream
                    )
                    if stream:
                        list(result)
            wait_idle(fake)
            # the upstream's connection was closed by the proxy, long before its 60 s budget
            assert fake.in_flight == 0 and len(fake.chat_requests) == 1


@pytest.mark.parametrize(("path", "extra"), [
    ("/v1/chat/completions", {}),
    ("/v1/messages", {"max_tokens": 64}),
])
def test_client_leaving_mid_stream_cancels_the_upstream_call(path: str, extra: dict[str, int]) -> None:
    # prose dripped a byte at a time, streamed live: the proxy is streaming it when the client leaves
    with FakeUpstream([drip(0.002, text="word " * 2000)]) as fake:
        with proxy(upstream_backend(fake, total=60, read=30), stream_prose="live") as url:
            body = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": True, **extra}
            if path == "/v1/messages":
                body["tools"] = TOOLS_ANTHROPIC
            with httpx.stream("POST", f"{url}{path}", json=body, timeout=30) as response:
                for line in response.iter_lines():
                    if "word" in line:
                        break  # one prose delta seen: leave, closing the connection
            assert len(fake.chat_requests) == 1  # the upstream call had started
            wait_idle(fake)
            assert fake.in_flight == 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_request_timeout_is_504(stream: bool) -> None:
    # an upstream that keeps the connection busy forever, well inside its own 60 s budget
    with FakeUpstream([drip(0.02, forever=True)]) as fake:
        with proxy(upstream_backend(fake, total=60), request_timeout=0.5) as url:
            body = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": stream}
            response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
            assert response.status_code == 504
            assert response.json()["error"]["type"] == "timeout_error"
            wait_idle(fake)
            assert fake.in_flight == 0


# -- keys, body cap, client mistakes ----------------------------------------------

@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[FakeUpstream, str, Path]]:
    with FakeUpstream([]) as fake:
        with proxy(upstream_backend(fake), api_key="sk-proxy-key", max_body_bytes=4096,
                   transcripts_dir=tmp_path / "t") as url:
            yield fake, url, tmp_path / "t"


def test_api_key_required_in_both_shapes(guarded: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, _ = guarded
    with openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0) as c:
        with pytest.raises(openai.AuthenticationError) as oe:
            c.chat.completions.create(model="m", messages=USER)
    assert oe.value.status_code == 401 and oe.value.response.json()["error"]["type"] == "authentication_error"
    with anthropic.Anthropic(base_url=url, api_key="wrong", max_retries=0) as a:
        with pytest.raises(anthropic.AuthenticationError) as ae:
            a.messages.create(model="m", max_tokens=8, messages=USER_ANTHROPIC)
    body = ae.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "authentication_error"
    for path in ("/v1/chat/completions", "/v1/messages", "/v1/models"):
        method = "GET" if path.endswith("models") else "POST"
        assert httpx.request(method, f"{url}{path}", json={}).status_code == 401
    assert httpx.get(f"{url}/health").status_code == 200
    assert fake.chat_requests == []


def test_api_key_as_bearer_and_x_api_key(guarded: tuple[FakeUpstream, str, Path]) -> None:
    fake, url, transcripts = guarded
    fake.enqueue(action("get_weather", city="Paris"), "Hi.")
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-proxy-key", max_retries=0) as c:  # Bearer
        completion = c.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI)
    assert completion.choices[0].message.tool_calls is not None
    with anthropic.Anthropic(base_url=url, api_key="sk-proxy-key", max_retries=0) as a:  # x-api-key
        assert a.messages.create(model="m", max_tokens=8, messages=USER_ANTHROPIC).content[0].type == "text"
    # the proxy's key reaches neither the upstream nor a transcript
    assert all("sk-proxy-key" not in json.dumps(r.headers) for r in fake.requests)
    for path in transcripts.glob("*.jsonl"):
        assert "sk-proxy-key" not in path.read_text()


def test_body_too_large_is_413(guarded: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = guarded
    big: list[ChatCompletionMessageParam] = [{"role": "user", "content": "x" * 10_000}]
    big_anthropic: list[MessageParam] = [{"role": "user", "content": "x" * 10_000}]
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-proxy-key", max_retries=0) as c:
        with pytest.raises(openai.APIStatusError) as oe:
            c.chat.completions.create(model="m", messages=big)
    assert oe.value.status_code == 413
    with anthropic.Anthropic(base_url=url, api_key="sk-proxy-key", max_retries=0) as a:
        with pytest.raises(anthropic.APIStatusError) as ae:
            a.messages.create(model="m", max_tokens=8, messages=big_anthropic)
    body = ae.value.body
    assert ae.value.status_code == 413 and isinstance(body, dict) and body["error"]["type"] == "request_too_large"


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/v1/chat/completions", b"{not json"),
        ("/v1/chat/completions", b""),
        ("/v1/chat/completions", b"[]"),
        ("/v1/chat/completions", b'{"model": "m"}'),
        ("/v1/chat/completions", b'{"model": "m", "messages": "hi"}'),
        ("/v1/chat/completions", b'{"messages": [{"role": "wizard", "content": "x"}]}'),
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}'),
        ("/v1/messages", b"{not json"),
        ("/v1/messages", b'{"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "video"}]}]}'),
        ("/v1/messages", b'{"messages": [], "tools": [{"name": 5}]}'),
    ],
)
def test_client_mistakes_are_400_in_the_right_shape(
    guarded: tuple[FakeUpstream, str, Path], path: str, content: bytes
) -> None:
    _, url, _ = guarded
    headers = {"authorization": "Bearer sk-proxy-key", "content-type": "application/json"}
    response = httpx.post(f"{url}{path}", content=content, headers=headers)
    assert response.status_code == 400
    body = response.json()
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["type"] == "invalid_request_error"


def test_unknown_routes_are_404_and_405_in_shape(guarded: tuple[FakeUpstream, str, Path]) -> None:
    _, url, _ = guarded
    assert httpx.get(f"{url}/v1/nothing").json()["error"]["type"] == "not_found_error"
    assert httpx.post(f"{url}/v1/messages/batches", json={}).json()["type"] == "error"
    response = httpx.get(f"{url}/v1/chat/completions")
    assert response.status_code == 405 and "error" in response.json()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_transcript_per_request(guarded: tuple[FakeUpstream, str, Path], stream: bool) -> None:
    fake, url, transcripts = guarded
    fake.enqueue("no tool for you", action("get_weather", city="Paris"))
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-proxy-key", max_retries=0) as c:
        result = c.chat.completions.create(
            model="m", messages=USER, tools=TOOLS_OPENAI, tool_choice="required", stream=stream
        )
        if stream:
            list(result)
    (path,) = transcripts.glob("*.jsonl")
    events = read_transcript(path)
    types = [e["type"] for e in events]
    assert types[:2] == ["run_start", "request"] and types[-1] == "run_end"
    assert events[-1]["status"] == "final" and events[-1]["steps"] == 2 and events[-1]["corrections"] == 1
    assert types.count("model_request") == 2 and "retry" in types and "tool_call" in types
    request = events[1]
    assert request["tool_choice"] == "required" and request["normalized"]["protocol"] == "openai"
    assert request["normalized"]["stream"] is stream and request["messages"][0]["content"] == QUESTION
    assert [t["name"] for t in request["tools"]] == ["get_weather", "get_time"]
    assert path.stem == events[0]["run"]


# -- the bind rule and the command -------------------------------------------------

@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("192.168.1.5", False), ("example.com", False),
])
def test_bind_rule(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    check_bind(host, "key")
    if loopback:
        check_bind(host, None)
    else:
        with pytest.raises(UsageError, match="--api-key"):
            check_bind(host, None)


def test_serve_refuses_public_bind_without_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTFSM_API_KEY"}
    result = CliRunner().invoke(cli_app, ["serve", "--host", "0.0.0.0", "--backend", "openai",
                                          "--base-url", "http://127.0.0.1:9/v1"], env=env)
    assert result.exit_code == 2 and "--api-key" in result.output


def test_serve_command_proxies(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTFSM_API_KEY": "sk-cli-key"}
    env.pop("OPENAI_API_KEY", None)
    with FakeUpstream([action("get_time", tz="UTC")]) as fake:
        with serve_command(fake.base_url, tmp_path, env=env) as served:
            with openai.OpenAI(base_url=f"{served.url}/v1", api_key="sk-cli-key", max_retries=0) as c:
                completion = c.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI)
        err = served.stderr
    (call,) = completion.choices[0].message.tool_calls or []
    assert isinstance(call, ChatCompletionMessageFunctionToolCall) and call.function.name == "get_time"
    # the proxy's key is not the upstream's: it never travels upstream
    assert "authorization" not in fake.chat_requests[0].headers
    assert "sk-cli-key" not in err.decode() and len(list(tmp_path.glob("*.jsonl"))) == 1



@pytest.mark.parametrize("stream", [False, True])
def test_transcript_write_failure_is_a_500_that_names_no_server_path(tmp_path: Path, stream: bool) -> None:
    """A transcript the proxy cannot write (a full disk, a vanished mount; here its folder
    replaced by a file) is the proxy's own failure: a 500 the SDK is told not to retry,
    whose message names no path of the server's; the path goes to the proxy's log."""
    transcripts = tmp_path / "private-transcripts"
    with FakeUpstream([]) as fake:
        with proxy(upstream_backend(fake), transcripts_dir=transcripts) as url:
            transcripts.write_text("not a folder")
            fake.enqueue(action("get_weather", city="Paris"))
            body = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": stream}
            response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
            assert response.status_code == 500
            error = response.json()["error"]
            assert error["type"] == "server_error" and "transcript" in error["message"]
            assert str(tmp_path) not in response.text and "private-transcripts" not in response.text
            with anthropic.Anthropic(base_url=url, api_key="k", max_retries=2) as a:
                with pytest.raises(anthropic.InternalServerError) as ae:
                    a.messages.create(model="m", max_tokens=64, messages=USER_ANTHROPIC)
            assert "private-transcripts" not in json.dumps(ae.value.body)
            # the proxy served on, and the SDK did not retry the failure
            assert len(fake.chat_requests) <= 2
