"""A held stream keeps its client's connection alive.

By default a tool-mode stream holds each attempt's prose until the engine accepts it, and
its headers left with the first event: on a slow model a turn sent not one byte for
minutes, and a client (Codex's stream idle timeout, an SDK's read timeout, nginx's
``proxy_read_timeout``) gave up on it. Now a stream that has had nothing to send for
``keep_alive`` seconds sends its headers and a keep-alive (an SSE comment; Anthropic's own
``ping`` event), which every SDK skips; a failure after one ends the stream with the
protocol's error event, since its status has left. Real parts: a FakeUpstream that answers late, the
proxy on 127.0.0.1 with a keep-alive of a tenth of a second, the official openai (chat and
Responses) and anthropic SDKs whose read timeout is shorter than the upstream's wait, and a
raw httpx read of the bytes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import uvicorn

from agentfsm.server.app import create_app
from agentfsm.server.streaming import SHUT_DOWN
from agentfsm.testing import FakeReply, FakeUpstream, drip, latency
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, action, proxy, upstream_backend, wait_idle, wire_text

#: the proxy's keep-alive interval here (15 s by default)
EVERY = 0.1
#: seconds the upstream waits before it answers
LATE = 2.5
#: the clients' read timeout: shorter than the upstream's wait, many keep-alives long
PATIENCE = 1.5
USER: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
CALL = action("get_weather", city="Paris")
KEEP_ALIVE = ": keep-alive"


@contextmanager
def _served(fake: FakeUpstream, **settings: Any) -> Iterator[str]:
    with proxy(upstream_backend(fake, read=30, total=60), keep_alive=EVERY, **settings) as url:
        yield url


def _events(text: str) -> list[str]:
    return [e for e in text.split("\n\n") if e]


@pytest.mark.parametrize("tools", [True, False], ids=["held-turn", "no-tools"])
def test_keep_alives_arrive_before_the_answer_which_is_unchanged(tmp_path: Path, tools: bool) -> None:
    # with tools the turn is held; without, the upstream is slow to its first token (a long prompt)
    body: dict[str, Any] = {"model": "m", "messages": USER, "stream": True}
    if tools:
        body["tools"] = TOOLS_OPENAI
    with FakeUpstream([latency(LATE, CALL), CALL]) as fake, _served(fake, transcripts_dir=tmp_path) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=PATIENCE) as held:
            assert held.status_code == 200  # the headers left before the answer was decided
            assert held.headers["content-type"].startswith("text/event-stream")
            text = "".join(held.iter_text())
        at_once = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).text
    events = _events(text)
    first = next(i for i, e in enumerate(events) if e != KEEP_ALIVE)
    assert first >= 1  # keep-alives first (about LATE / EVERY of them), then the answer
    # nothing else differs from the same request answered at once (which sent no keep-alive)
    assert KEEP_ALIVE not in at_once
    rest = [e for e in events[first:] if e != KEEP_ALIVE]
    assert wire_text("\n\n".join(rest)) == wire_text("\n\n".join(_events(at_once)))
    assert ('"name": "get_weather"' in text) is tools and events[-1] == "data: [DONE]"
    transcripts = "".join(p.read_text(encoding="utf-8") for p in tmp_path.rglob("*") if p.is_file())
    assert "get_weather" in transcripts and "keep-alive" not in transcripts and '"ping"' not in transcripts


def test_openai_chat_sdk_waits_through_a_held_stream() -> None:
    with FakeUpstream([latency(LATE, CALL)]) as fake, _served(fake) as url:
        with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=PATIENCE) as client:
            chunks = list(client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI,
                                                         stream=True))
    calls = [c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or []]
    assert calls[0].function is not None and calls[0].function.name == "get_weather"
    arguments = "".join(c.function.arguments or "" for c in calls if c.function is not None)
    assert json.loads(arguments) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_openai_responses_sdk_waits_through_a_held_stream() -> None:
    tools: list[Any] = [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
                         "parameters": t["function"]["parameters"]} for t in TOOLS_OPENAI]
    with FakeUpstream([latency(LATE, CALL)]) as fake, _served(fake) as url:
        with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=PATIENCE) as client:
            events = list(client.responses.create(model="m", input="Weather in Paris?", tools=tools, stream=True))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    done = events[-1]
    assert done.type == "response.completed"
    (call,) = done.response.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}


@pytest.mark.parametrize("helper", [False, True], ids=["events", "stream-helper"])
def test_anthropic_sdk_skips_pings_before_message_start(helper: bool) -> None:
    args: dict[str, Any] = {"model": "m", "max_tokens": 256, "messages": USER, "tools": TOOLS_ANTHROPIC}
    with FakeUpstream([latency(LATE, CALL)]) as fake, _served(fake) as url:
        if not helper:
            with httpx.stream("POST", f"{url}/v1/messages", json={**args, "stream": True}, timeout=PATIENCE) as held:
                first = _events("".join(held.iter_text()))[0]
            assert first == 'event: ping\ndata: {"type": "ping"}'  # Anthropic's own keep-alive, first
            fake.enqueue(latency(LATE, CALL))
        with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=PATIENCE) as client:
            if helper:
                with client.messages.stream(**args) as stream:
                    message = stream.get_final_message()
                    blocks = list(message.content)
            else:
                events = list(client.messages.create(**args, stream=True))
                assert events[0].type == "message_start" and events[-1].type == "message_stop"
                blocks = [e.content_block for e in events if e.type == "content_block_start"]
    (block,) = blocks
    assert block.type == "tool_use" and block.name == "get_weather"
    if helper:
        assert block.input == {"city": "Paris"}


def test_a_failure_after_keep_alives_ends_the_stream_with_its_error_event() -> None:
    # the upstream refuses the request, late: the headers (200) have left by then
    refused = FakeReply(status=400, latency=LATE, body='{"error": {"message": "bad things", "type": "invalid_request_error"}}')
    body = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": True}
    with FakeUpstream([refused, refused, FakeReply(status=400, body=refused.body)]) as fake, _served(fake) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=PATIENCE) as held:
            assert held.status_code == 200
            events = _events("".join(held.iter_text()))
        assert events[0] == KEEP_ALIVE
        error = json.loads(events[-1].removeprefix("data: "))["error"]
        assert "bad things" in error["message"]
        assert "data: [DONE]" not in events  # never a clean end
        with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=PATIENCE) as client:
            with pytest.raises(openai.APIError, match="bad things") as raised:
                list(client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI,
                                                    stream=True))
            assert not isinstance(raised.value, openai.APIStatusError)  # an error event, not a status
            # answered within the interval: a plain HTTP error status, as before
            with pytest.raises(openai.APIStatusError, match="bad things") as at_once:
                client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI,
                                               stream=True)
            assert at_once.value.status_code == 502


def test_a_client_leaving_a_held_stream_cancels_the_upstream_call(tmp_path: Path) -> None:
    body = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": True}
    # the upstream drips its prose a byte a millisecond (held: not sent until accepted)
    with FakeUpstream([drip(0.001, text="word " * 4000)]) as fake, _served(fake, transcripts_dir=tmp_path) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as held:
            kept = 0
            for line in held.iter_lines():
                assert not line.startswith("data:")  # held: nothing but keep-alives
                kept += line == KEEP_ALIVE
                if kept == 20:
                    break  # leave, closing the connection
        assert len(fake.chat_requests) == 1
        wait_idle(fake)
        assert fake.in_flight == 0  # the proxy closed the upstream's connection mid-answer
    (transcript,) = [p for p in tmp_path.rglob("*") if p.is_file()]
    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    # the text that had arrived is recorded as cut, then the run's end
    assert [e["type"] for e in events[-2:]] == ["model_output", "run_end"]
    assert events[-2]["cut"] is True and events[-2]["text"].startswith("word")
    assert events[-1]["status"] == "cancelled"


def test_the_server_stopping_under_a_held_stream_ends_it_with_its_error_event() -> None:
    # uvicorn's shutdown timeout cancels the request: its client, kept alive, is told why
    body = {"model": "m", "messages": USER, "tools": TOOLS_OPENAI, "stream": True}
    with FakeUpstream([drip(0.02, forever=True)]) as fake:
        app = create_app(upstream_backend(fake, read=30, total=60), keep_alive=EVERY)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical",
                                               timeout_graceful_shutdown=1))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30) as held:
            lines = []
            for line in held.iter_lines():
                lines += [line] if line else []
                if lines == [KEEP_ALIVE]:
                    server.should_exit = True  # held and kept alive: the server is told to stop
        thread.join(20)
        assert not thread.is_alive()
        wait_idle(fake)
        assert fake.in_flight == 0
    assert held.status_code == 200 and set(lines[:-1]) == {KEEP_ALIVE}
    error = json.loads(lines[-1].removeprefix("data: "))["error"]
    assert error["message"] == SHUT_DOWN
