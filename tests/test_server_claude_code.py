"""What Claude Code sends is accepted as it is (issue 14 item 1, the request level).

Replays Claude Code's captured first requests (``fixtures/clients/``) raw over HTTP,
the way it sends them (``HEAD /`` first, then ``POST /v1/messages?beta=true``), and runs
a long tool conversation through the official ``anthropic`` SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from agentfsm.core.messages import SystemMessage, UserMessage
from agentfsm.protocols import normalize_anthropic
from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, action, proxy, upstream_backend

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "clients"
CAPTURES = ["claude_code_request.json", "claude_code_request_full_tools.json"]
# hop-by-hop and length headers belong to the captured connection, not to the replay
_DROPPED_HEADERS = {"host", "content-length", "connection", "accept-encoding", "x-api-key"}


@pytest.fixture
def served() -> Iterator[tuple[FakeUpstream, str]]:
    with FakeUpstream([]) as fake, proxy(upstream_backend(fake)) as url:
        yield fake, url


def _capture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def _sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_root_answers_head_and_get(served: tuple[FakeUpstream, str]) -> None:
    _, url = served
    assert httpx.head(url + "/").status_code == 200
    response = httpx.get(url + "/")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("name", CAPTURES)
def test_captured_claude_code_request_is_served(
    served: tuple[FakeUpstream, str], name: str, stream: bool
) -> None:
    fake, url = served
    capture = _capture(name)
    body = {**capture["body"], "stream": stream}
    fake.enqueue(action("Bash", command="printf hi > hello.txt", description="Create hello.txt"))
    headers = {k: v for k, v in capture["headers"].items() if k.lower() not in _DROPPED_HEADERS}
    assert httpx.head(url + "/", headers=headers).status_code == 200
    response = httpx.post(url + capture["path"], json=body, headers=headers, timeout=60)
    assert response.status_code == 200, response.text[:500]
    if stream:
        events = _sse_events(response.text)
        assert events[-1]["type"] == "message_stop"
        (use,) = [e["content_block"] for e in events if e["type"] == "content_block_start"
                  and e["content_block"]["type"] == "tool_use"]
        arguments = "".join(e["delta"]["partial_json"] for e in events
                            if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta")
        assert use["name"] == "Bash" and json.loads(arguments)["command"] == "printf hi > hello.txt"
    else:
        (use,) = [b for b in response.json()["content"] if b["type"] == "tool_use"]
        assert use["name"] == "Bash" and use["input"]["command"] == "printf hi > hello.txt"
    ignored = response.headers["x-agentfsm-ignored"].split(",")
    assert {"thinking", "context_management", "output_config.effort"} <= set(ignored)
    deferred = any(t.get("defer_loading") for t in capture["body"]["tools"])
    assert ("tools.defer_loading" in ignored) is deferred
    (sent,) = fake.chat_requests
    # the mid-conversation system message is folded into the one system prompt, in order
    system = sent.messages[0]
    assert system["role"] == "system" and [m["role"] for m in sent.messages[1:]] == ["user"]
    mid = capture["body"]["messages"][1]["content"][0]["text"]
    top = capture["body"]["system"][-1]["text"]
    assert top in system["content"] and mid in system["content"]
    assert system["content"].index(top) < system["content"].index(mid)
    assert sent.body["user"] == capture["body"]["metadata"]["user_id"]


def test_system_messages_anywhere_fold_in_order() -> None:
    request = normalize_anthropic({
        "max_tokens": 64000,
        "system": [{"type": "text", "text": "top", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "system", "content": "first"},
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
            {"role": "system", "content": [{"type": "text", "text": "second"}]},
        ],
    })
    assert request.messages == (SystemMessage(content="top\n\nfirst\n\nsecond"), UserMessage(content="hi"))
    assert request.max_tokens == 64000


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_six_turn_tool_conversation_keeps_ids_paired(
    served: tuple[FakeUpstream, str], stream: bool
) -> None:
    """Five tool calls and a final answer: each turn sends the whole history back,
    with the ids the proxy minted, and each result stays paired with its call."""
    fake, url = served
    cities = ["Paris", "Lima", "Cairo", "Oslo", "Quito"]
    fake.enqueue(*(action("get_weather", city=c) for c in cities), "All five are sunny.")
    messages: list[Any] = [{"role": "user", "content": "Weather in five cities, one at a time."}]
    seen_ids: list[str] = []
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=30) as client:
        for turn in range(6):
            if stream:
                with client.messages.stream(
                    model="m", max_tokens=64000, messages=messages, tools=TOOLS_ANTHROPIC
                ) as events:
                    message = events.get_final_message()
            else:
                message = client.messages.create(
                    model="m", max_tokens=64000, messages=messages, tools=TOOLS_ANTHROPIC
                )
            if turn == 5:
                assert message.stop_reason == "end_turn"
                assert "".join(b.text for b in message.content if b.type == "text") == "All five are sunny."
                break
            (use,) = [b for b in message.content if b.type == "tool_use"]
            assert use.input == {"city": cities[turn]} and use.id not in seen_ids
            seen_ids.append(use.id)
            messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": f"{cities[turn]}: sunny"}
            ]})
    last = fake.chat_requests[-1].messages
    text = "\n".join(str(m["content"]) for m in last)
    for city in cities:  # every call and its result reached the model, in order
        assert f"{city}: sunny" in text
    order = [text.index(f"{city}: sunny") for city in cities]
    assert order == sorted(order)
