"""The proxy driven by the official ``anthropic`` SDK (messages and ``messages.stream()``).

Upstream: a scripted FakeUpstream on 127.0.0.1 answering in the json-action dialect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, action, base, fake, wire_snapshot  # base, fake: fixtures

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def client(base: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=30) as c:
        yield c


def _create(client: anthropic.Anthropic, **kwargs: Any) -> tuple[Any, dict[str, str]]:
    kwargs.setdefault("messages", USER)
    raw = client.messages.with_raw_response.create(model="fake-model", max_tokens=256, **kwargs)
    return raw.parse(), dict(raw.headers)


def _tool_uses(message: Any) -> list[Any]:
    return [b for b in message.content if b.type == "tool_use"]


def _text(message: Any) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def test_single_turn_tool_use(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue(action("get_weather", city="Paris"))
    message, headers = _create(client, tools=TOOLS_ANTHROPIC)
    assert message.stop_reason == "tool_use"
    (use,) = _tool_uses(message)
    assert use.name == "get_weather" and use.input == {"city": "Paris"}
    assert use.id.startswith("toolu_")
    assert headers["x-agentfsm-attempts"] == "1"


def _history_with_result() -> list[Any]:
    return [
        *USER,
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C and sunny"}
        ]},
    ]


def test_multi_turn_result_continuation(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("It is 18 C and sunny.")
    message, _ = _create(client, messages=_history_with_result(), tools=TOOLS_ANTHROPIC)
    assert _text(message) == "It is 18 C and sunny." and message.stop_reason == "end_turn"
    prompt = fake.chat_requests[0].messages
    assert "get_weather" in prompt[2]["content"] and "18 C and sunny" in prompt[3]["content"]


def test_later_turn_without_tools(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Sunny.")
    message, _ = _create(client, messages=_history_with_result())
    assert _text(message) == "Sunny." and not _tool_uses(message)


def test_forced_tool(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue(action("get_time", tz="CET"))
    message, _ = _create(client, tools=TOOLS_ANTHROPIC, tool_choice={"type": "tool", "name": "get_time"})
    assert [u.name for u in _tool_uses(message)] == ["get_time"]


def test_tool_choice_any_retries_prose(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Probably sunny.", action("get_weather", city="Paris"))
    message, headers = _create(client, tools=TOOLS_ANTHROPIC, tool_choice={"type": "any"})
    assert [u.name for u in _tool_uses(message)] == ["get_weather"]
    assert headers["x-agentfsm-attempts"] == "2" and headers["x-agentfsm-corrections"] == "1"


def test_tool_choice_none(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Sunny, I guess.")
    message, _ = _create(client, tools=TOOLS_ANTHROPIC, tool_choice={"type": "none"})
    assert _text(message) == "Sunny, I guess." and not _tool_uses(message)


def test_disable_parallel_tool_use(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue(action("get_weather", city="Paris") + "\n" + action("get_weather", city="Rome"))
    choice = {"type": "auto", "disable_parallel_tool_use": True}
    message, _ = _create(client, tools=TOOLS_ANTHROPIC, tool_choice=choice)
    assert [u.input["city"] for u in _tool_uses(message)] == ["Paris"]


def test_refusal_then_retry_then_call(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("As an AI language model, I cannot access tools.", action("get_weather", city="Paris"))
    message, headers = _create(client, tools=TOOLS_ANTHROPIC)
    assert [u.name for u in _tool_uses(message)] == ["get_weather"] and _text(message) == ""
    assert headers["x-agentfsm-attempts"] == "2"


def test_invalid_json_then_retry(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    broken = "```json action\n{\"tool\": \"get_weather\", \"parameters\": {\"city\": [[[[}\n```"
    fake.enqueue(broken, action("get_weather", city="Paris"))
    message, headers = _create(client, tools=TOOLS_ANTHROPIC)
    assert _tool_uses(message)[0].input == {"city": "Paris"}
    assert headers["x-agentfsm-corrections"] == "1"


def test_multiple_blocks_are_parallel_tool_uses(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Two lookups.\n" + action("get_weather", city="Paris") + action("get_time", tz="CET"))
    message, _ = _create(client, tools=TOOLS_ANTHROPIC)
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert _text(message) == "Two lookups."


def test_plain_text_final_answer(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Mild, usually.")
    message, _ = _create(client, tools=TOOLS_ANTHROPIC, system="Be brief.")
    assert _text(message) == "Mild, usually." and message.stop_reason == "end_turn"
    assert "Be brief." in fake.chat_requests[0].messages[0]["content"]


def test_no_tools_passes_through(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Hi!")
    message, _ = _create(client, messages=[{"role": "user", "content": "hello"}])
    assert _text(message) == "Hi!"
    assert fake.chat_requests[0].messages == [{"role": "user", "content": "hello"}]


def test_stream_tool_use(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Checking.\n" + action("get_weather", city="Paris", unit="c"))
    with client.messages.stream(model="m", max_tokens=256, messages=USER, tools=TOOLS_ANTHROPIC) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert final.stop_reason == "tool_use"
    assert _text(final).strip() == "Checking."
    (use,) = _tool_uses(final)
    assert use.name == "get_weather" and use.input == {"city": "Paris", "unit": "c"}


def test_stream_text(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("Sunny all week.")
    with client.messages.stream(model="m", max_tokens=256, messages=USER, tools=TOOLS_ANTHROPIC) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Sunny all week." and final.stop_reason == "end_turn"


def test_stream_pass_through(fake: FakeUpstream, client: anthropic.Anthropic) -> None:
    fake.enqueue("streamed without tools")
    with client.messages.stream(model="m", max_tokens=64, messages=USER) as stream:
        assert "".join(stream.text_stream) == "streamed without tools"


def test_async_client(fake: FakeUpstream, base: str) -> None:
    fake.enqueue(action("get_time", tz="UTC"), "Noon.")

    async def run() -> tuple[Any, str]:
        async with anthropic.AsyncAnthropic(base_url=base, api_key="x", max_retries=0) as c:
            message = await c.messages.create(model="m", max_tokens=64, messages=USER, tools=TOOLS_ANTHROPIC)
            async with c.messages.stream(model="m", max_tokens=64, messages=USER, tools=TOOLS_ANTHROPIC) as s:
                text = "".join([t async for t in s.text_stream])
            return message, text

    message, text = asyncio.run(run())
    assert _tool_uses(message)[0].input == {"tz": "UTC"} and text == "Noon."


def test_models_list_in_anthropic_shape(client: anthropic.Anthropic) -> None:
    assert [m.id for m in client.models.list()] == ["openai:fake-model"]


def test_wire_payloads_match_snapshot(fake: FakeUpstream, base: str, snapshot: Any) -> None:
    fake.enqueue(
        "Checking both.\n" + action("get_weather", city="Paris") + action("get_time", tz="CET"),
        "Looking it up.\n" + action("get_weather", city="Rome"),
    )
    body = {"model": "fake-model", "max_tokens": 128, "messages": USER, "tools": TOOLS_ANTHROPIC}
    assert wire_snapshot(base, "/v1/messages", body) == snapshot
