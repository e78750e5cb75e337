"""The FakeUpstream test server itself, spoken to with plain httpx."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from agentfsm.testing import FakeReply, FakeUpstream, ReceivedRequest, garbage, latency, reply, reset, status

CHAT = {"model": "m", "messages": [{"role": "user", "content": "ping"}], "max_tokens": 4}


@pytest.fixture
def echo() -> Iterator[FakeUpstream]:
    with FakeUpstream(model="echo-model") as fake:
        yield fake


def test_default_script_echoes_the_last_message(echo: FakeUpstream) -> None:
    answer = httpx.post(f"{echo.base_url}/chat/completions", json=CHAT).json()
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "echo: ping"}
    assert answer["model"] == "echo-model" and answer["usage"]["completion_tokens"] > 0


def test_models_and_unknown_routes(echo: FakeUpstream) -> None:
    models = httpx.get(f"{echo.base_url}/models").json()
    assert [m["id"] for m in models["data"]] == ["echo-model"]
    assert httpx.get(f"{echo.url}/nowhere").status_code == 404
    assert [r.path for r in echo.requests] == ["/v1/models", "/nowhere"]
    assert echo.chat_requests == []


def test_sse_stream_shape(echo: FakeUpstream) -> None:
    with httpx.stream("POST", f"{echo.base_url}/chat/completions", json={**CHAT, "stream": True}) as r:
        assert r.headers["content-type"] == "text/event-stream"
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "echo: ping"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_queue_faults_and_exhaustion() -> None:
    with FakeUpstream([status(429, retry_after=3), garbage(), reset()]) as fake, httpx.Client() as client:
        url = f"{fake.base_url}/chat/completions"
        throttled = client.post(url, json=CHAT)
        assert (throttled.status_code, throttled.headers["retry-after"]) == (429, "3")
        assert client.post(url, json=CHAT).text == "<html>this is not json</html>"
        with pytest.raises(httpx.TransportError):
            client.post(url, json=CHAT)
        fake.enqueue(reply("late"))
        assert client.post(url, json=CHAT).json()["choices"][0]["message"]["content"] == "late"
        exhausted = client.post(url, json=CHAT)
        assert exhausted.status_code == 500 and "exhausted" in exhausted.text


def test_records_headers_and_chunked_bodies(echo: FakeUpstream) -> None:
    body = json.dumps(CHAT).encode()
    response = httpx.post(
        f"{echo.base_url}/chat/completions",
        content=iter([body[:10], body[10:]]),  # an iterator is sent chunked
        headers={"authorization": "Bearer t", "content-type": "application/json"},
    )
    assert response.status_code == 200
    received = echo.chat_requests[0]
    assert received.headers["transfer-encoding"] == "chunked"
    assert received.headers["authorization"] == "Bearer t"
    assert received.body == CHAT and received.messages == CHAT["messages"] and not received.stream


def test_function_script_and_concurrent_latency() -> None:
    def script(request: ReceivedRequest) -> FakeReply:
        return latency(0.3, f"answer to {request.messages[-1]['content']}")

    async def fire(base_url: str) -> list[str]:
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(base_url=base_url + "/", limits=limits) as client:
            payloads = [{**CHAT, "messages": [{"role": "user", "content": str(i)}]} for i in range(64)]
            answers = await asyncio.gather(*(client.post("chat/completions", json=p) for p in payloads))
        return [a.json()["choices"][0]["message"]["content"] for a in answers]

    with FakeUpstream(script) as fake:
        texts = asyncio.run(fire(fake.base_url))
    assert texts == [f"answer to {i}" for i in range(64)]
    assert fake.peak_in_flight > 8  # the requests overlapped instead of queueing
    assert fake.in_flight == 0


def test_a_client_that_leaves_during_latency_ends_the_request() -> None:
    """A reply held back by ``latency`` slept on after its client had gone, counted in
    flight all along: a test could not see that a client's departure reached its upstream.
    A real server stops there; the fake now does too."""
    with FakeUpstream([latency(120, "never sent")]) as fake:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{fake.base_url}/chat/completions", json=CHAT, timeout=httpx.Timeout(30, read=0.5))
        deadline = time.monotonic() + 30  # far less than the reply's 120 s
        while fake.in_flight:
            assert time.monotonic() < deadline, "the fake still holds the reply of a client that left"
            time.sleep(0.02)
        assert len(fake.chat_requests) == 1


def test_a_load_fake_keeps_no_requests_and_reads_what_orjson_refuses() -> None:
    with FakeUpstream(keep_requests=False) as fake:
        # NaN is not JSON to orjson; the fake falls back to json, as clients that send it expect
        body = b'{"model": "m", "messages": [{"role": "user", "content": "nan"}], "temperature": NaN}'
        answer = httpx.post(f"{fake.base_url}/chat/completions", content=body,
                            headers={"content-type": "application/json"}).json()
        assert answer["choices"][0]["message"]["content"] == "echo: nan"
        assert fake.requests == []


def test_a_reply_with_a_lone_surrogate_is_sent_escaped() -> None:
    with FakeUpstream(["half \ud800 a pair"]) as fake:
        raw = httpx.post(f"{fake.base_url}/chat/completions", json=CHAT).content
    assert b"\\ud800" in raw
    assert json.loads(raw)["choices"][0]["message"]["content"] == "half \ud800 a pair"


def test_it_can_keep_to_max_tokens_as_a_model_does() -> None:
    with FakeUpstream(["x" * 100, "short"], honour_max_tokens=True) as fake:
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        cut = httpx.post(f"{fake.base_url}/chat/completions", json=body).json()["choices"][0]
        whole = httpx.post(f"{fake.base_url}/chat/completions", json=body).json()["choices"][0]
    assert (cut["message"]["content"], cut["finish_reason"]) == ("x" * 20, "length")
    assert (whole["message"]["content"], whole["finish_reason"]) == ("short", "stop")


def test_a_stream_ends_with_usage_when_asked() -> None:
    with FakeUpstream(["hello there"]) as fake:
        body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}]}
        text = httpx.post(f"{fake.base_url}/chat/completions", json=body).text
    chunks = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 2


def test_stopping_with_a_client_that_stopped_reading_leaves_no_socket_open() -> None:
    """A flood to a client that reads nothing fills both buffers; closing that connection
    waits for a flush that never comes. Stopping must still close its socket (it was
    collected unclosed later, failing whichever test the collector ran in)."""
    import gc
    import socket
    import time
    import warnings

    from agentfsm.testing import flood

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        with FakeUpstream([flood()]) as fake:
            port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
            body = json.dumps(CHAT).encode()
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n" % len(body) + body
            )
            time.sleep(1.0)  # never read
        del fake
        gc.collect()
        client.close()
        gc.collect()
    assert [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)] == []
