"""The proxy driven by the official ``openai`` SDK (sync, async, streaming) over real HTTP.

Upstream: a scripted FakeUpstream on 127.0.0.1 answering in the json-action dialect.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_OPENAI, action, base, fake, wire_snapshot  # base, fake: fixtures

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def client(base: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) as c:
        yield c


def _create(client: openai.OpenAI, **kwargs: Any) -> tuple[Any, dict[str, str]]:
    raw = client.chat.completions.with_raw_response.create(model="fake-model", **kwargs)
    return raw.parse(), dict(raw.headers)


def test_single_turn_call(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(action("get_weather", city="Paris"))
    completion, headers = _create(client, messages=USER, tools=TOOLS_OPENAI)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert call.id.startswith("call_") and len(call.id) == len("call_") + 24
    assert headers["x-agentfsm-attempts"] == "1" and headers["x-agentfsm-corrections"] == "0"
    # the upstream saw the contract, not OpenAI tools
    sent = fake.chat_requests[0].body
    assert "tools" not in sent and "get_weather" in sent["messages"][0]["content"]


def _history_with_result() -> list[Any]:
    return [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_abc", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "18 C and sunny"},
    ]


def test_multi_turn_result_continuation(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("It is 18 C and sunny in Paris.")
    completion, _ = _create(client, messages=_history_with_result(), tools=TOOLS_OPENAI)
    assert completion.choices[0].message.content == "It is 18 C and sunny in Paris."
    assert completion.choices[0].finish_reason == "stop"
    prompt = fake.chat_requests[0].messages
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
    # the earlier call goes back as action text; the result as a framed continuation
    assert "get_weather" in prompt[2]["content"] and "Paris" in prompt[2]["content"]
    assert "18 C and sunny" in prompt[3]["content"]


def test_later_turn_without_tools(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Sunny, 18 C.")
    completion, _ = _create(client, messages=_history_with_result())
    assert completion.choices[0].message.content == "Sunny, 18 C."
    assert completion.choices[0].message.tool_calls is None
    assert "get_weather" in fake.chat_requests[0].messages[2]["content"]


def test_forced_tool(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(action("get_time", tz="Europe/Paris"))
    forced = {"type": "function", "function": {"name": "get_time"}}
    completion, _ = _create(client, messages=USER, tools=TOOLS_OPENAI, tool_choice=forced)
    (call,) = completion.choices[0].message.tool_calls
    assert call.function.name == "get_time"
    assert "get_time" in fake.chat_requests[0].messages[0]["content"]


def test_tool_choice_required_retries_prose(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("The weather is probably nice.", action("get_weather", city="Paris"))
    completion, headers = _create(client, messages=USER, tools=TOOLS_OPENAI, tool_choice="required")
    assert completion.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert headers["x-agentfsm-attempts"] == "2" and headers["x-agentfsm-corrections"] == "1"
    assert len(fake.chat_requests) == 2


def test_tool_choice_none(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("I would say sunny.")
    completion, _ = _create(client, messages=USER, tools=TOOLS_OPENAI, tool_choice="none")
    assert completion.choices[0].message.content == "I would say sunny."
    assert completion.choices[0].message.tool_calls is None


def test_parallel_tool_calls_false_keeps_one(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(action("get_weather", city="Paris") + "\n" + action("get_weather", city="Rome"))
    completion, _ = _create(client, messages=USER, tools=TOOLS_OPENAI, parallel_tool_calls=False)
    calls = completion.choices[0].message.tool_calls
    assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Paris"]


def test_refusal_then_retry_then_call(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("I'm sorry, but I don't have access to tools or real-time data.",
                 action("get_weather", city="Paris"))
    completion, headers = _create(client, messages=USER, tools=TOOLS_OPENAI)
    assert completion.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert completion.choices[0].message.content is None  # the refusal never reaches the client
    assert headers["x-agentfsm-attempts"] == "2"
    correction = fake.chat_requests[1].messages[-1]
    assert correction["role"] == "user" and correction != USER[0]


def test_invalid_json_then_retry(fake: FakeUpstream, client: openai.OpenAI) -> None:
    broken = "```json action\n{\"tool\": \"get_weather\", \"parameters\": {\"city\": [[[[}\n```"
    fake.enqueue(broken, action("get_weather", city="Paris"))
    completion, headers = _create(client, messages=USER, tools=TOOLS_OPENAI)
    assert json.loads(completion.choices[0].message.tool_calls[0].function.arguments) == {"city": "Paris"}
    assert headers["x-agentfsm-corrections"] == "1"


def test_multiple_action_blocks_are_parallel_calls(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(action("get_weather", city="Paris") + "\n" + action("get_time", tz="CET"))
    completion, _ = _create(client, messages=USER, tools=TOOLS_OPENAI)
    calls = completion.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"]
    assert len({c.id for c in calls}) == 2


def test_plain_text_final_answer(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Paris is usually mild in spring.")
    completion, _ = _create(client, messages=USER, tools=TOOLS_OPENAI)
    assert completion.choices[0].message.content == "Paris is usually mild in spring."
    assert completion.choices[0].finish_reason == "stop"


def test_no_tools_passes_through(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Hello there.")
    completion, _ = _create(client, messages=[{"role": "user", "content": "hi"}], max_tokens=20)
    assert completion.choices[0].message.content == "Hello there."
    sent = fake.chat_requests[0].body
    assert sent["messages"] == [{"role": "user", "content": "hi"}] and sent["max_tokens"] == 20


def _collect(stream: Any) -> list[Any]:
    return [chunk for chunk in stream]


def test_streaming_prose_then_call(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Let me look that up.\n" + action("get_weather", city="Paris", unit="c"))
    chunks = _collect(
        client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI, stream=True)
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content.strip() == "Let me look that up."
    assert "json" not in content and "{" not in content  # no action text leaks
    deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].index == 0 and deltas[0].id.startswith("call_")
    assert deltas[0].function.name == "get_weather"
    arguments = "".join(d.function.arguments or "" for d in deltas)
    assert json.loads(arguments) == {"city": "Paris", "unit": "c"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_streaming_parallel_calls_have_stable_indexes(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(action("get_weather", city="Paris") + action("get_time", tz="CET"))
    chunks = _collect(
        client.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI, stream=True)
    )
    deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    starts = [d for d in deltas if d.id]
    assert [(d.index, d.function.name) for d in starts] == [(0, "get_weather"), (1, "get_time")]


def test_streaming_retry_sends_only_the_final_call(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("I cannot call tools.", action("get_weather", city="Paris"))
    chunks = _collect(
        client.chat.completions.create(
            model="m", messages=USER, tools=TOOLS_OPENAI, tool_choice="required", stream=True
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == ""  # prose is held while a call is required
    names = [tc.function.name for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or []) if tc.id]
    assert names == ["get_weather"]
    assert len(fake.chat_requests) == 2


def test_streaming_text_answer_with_usage(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Mild and sunny, most likely.")
    chunks = _collect(
        client.chat.completions.create(
            model="m", messages=USER, tools=TOOLS_OPENAI, stream=True,
            stream_options={"include_usage": True},
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Mild and sunny, most likely."
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_streaming_pass_through(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("plain streamed words")
    chunks = _collect(
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "plain streamed words"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_async_client_call_and_stream(fake: FakeUpstream, base: str) -> None:
    fake.enqueue(action("get_weather", city="Oslo"), "Cold.")

    async def run() -> tuple[Any, str]:
        async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as c:
            completion = await c.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI)
            stream = await c.chat.completions.create(model="m", messages=USER, tools=TOOLS_OPENAI, stream=True)
            text = "".join([ch.choices[0].delta.content or "" async for ch in stream if ch.choices])
            return completion, text

    completion, text = asyncio.run(run())
    assert json.loads(completion.choices[0].message.tool_calls[0].function.arguments) == {"city": "Oslo"}
    assert text == "Cold."


def test_models_and_health(client: openai.OpenAI, base: str) -> None:
    assert [m.id for m in client.models.list()] == ["openai:fake-model"]
    assert httpx.get(f"{base}/health").json() == {"status": "ok"}


def test_wire_payloads_match_snapshot(fake: FakeUpstream, base: str, snapshot: Any) -> None:
    fake.enqueue(
        "Checking both.\n" + action("get_weather", city="Paris") + action("get_time", tz="CET"),
        "Looking it up.\n" + action("get_weather", city="Rome"),
    )
    body = {"model": "fake-model", "messages": USER, "tools": TOOLS_OPENAI}
    assert wire_snapshot(base, "/v1/chat/completions", body) == snapshot
