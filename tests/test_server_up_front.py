"""Requests no model reply could serve are the client's 400, said in plain words, before
any upstream call: a history that leaves the model nothing to decide (calls without their
results, an assistant message last in tool mode), and a tool whose parameters are not an
object. Each used to be sent upstream, paid for, and refused afterwards ("event 'step' is
not allowed in state 'final'"), or retried to a 500. Real proxy, official SDKs, both
protocols, streamed and not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import TOOLS_ANTHROPIC, TOOLS_OPENAI, proxy, upstream_backend


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeUpstream, str]]:
    with FakeUpstream(lambda request: '{"final": {"content": "fine"}}') as fake, proxy(upstream_backend(fake)) as url:
        yield fake, url


def _use(id: str, city: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "get_weather", "input": {"city": city}}


ANTHROPIC_HISTORIES = {
    "prefill": ([{"role": "user", "content": "Weather in Oslo?"},
                 {"role": "assistant", "content": "Let me see"}], "assistant"),
    "a call without its result": ([{"role": "user", "content": "Weather in Oslo?"},
                                   {"role": "assistant", "content": [_use("toolu_1", "Oslo")]}], "toolu_1"),
    "one of two results": ([{"role": "user", "content": "Weather in Oslo and Rome?"},
                            {"role": "assistant", "content": [_use("toolu_1", "Oslo"), _use("toolu_2", "Rome")]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                          "content": "sunny"}]}], "toolu_2"),
}


@pytest.mark.parametrize("case", sorted(ANTHROPIC_HISTORIES))
@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_history_with_nothing_to_decide_is_a_400_before_the_upstream(
    served: tuple[FakeUpstream, str], case: str, stream: bool
) -> None:
    fake, base = served
    messages, named = ANTHROPIC_HISTORIES[case]
    before = len(fake.requests)
    with anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=30) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            if stream:
                with client.messages.stream(model="m", max_tokens=64, tools=TOOLS_ANTHROPIC,
                                            messages=messages) as events:  # type: ignore[arg-type]
                    events.get_final_message()
            else:
                client.messages.create(model="m", max_tokens=64, tools=TOOLS_ANTHROPIC,
                                       messages=messages)  # type: ignore[arg-type]
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    message = body["error"]["message"]
    assert named in message and "not allowed in state" not in message
    assert len(fake.requests) == before  # nothing was sent upstream


@pytest.mark.parametrize("stream", [False, True])
def test_openai_call_without_its_result_is_a_400_before_the_upstream(
    served: tuple[FakeUpstream, str], stream: bool
) -> None:
    fake, base = served
    messages: list[Any] = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
    ]
    before = len(fake.requests)
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) as client:
        with pytest.raises(openai.BadRequestError) as info:
            reply = client.chat.completions.create(model="m", messages=messages, tools=TOOLS_OPENAI, stream=stream)
            if stream:
                list(reply)  # type: ignore[arg-type]
    error = info.value.body
    assert isinstance(error, dict) and "call_9" in error["message"] and "result" in error["message"]
    assert error["param"] == "messages"  # the field at fault, as OpenAI names it
    assert len(fake.requests) == before
    # with its result the same conversation is served
    messages.append({"role": "tool", "tool_call_id": "call_9", "content": "sunny, 18 C"})
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) as client:
        done = client.chat.completions.create(model="m", messages=messages, tools=TOOLS_OPENAI)
    assert done.choices[0].message.content == "fine"


@pytest.mark.parametrize("schema", [{"type": "array", "items": {"type": "string"}}, {"type": "string"}])
def test_a_tool_whose_parameters_are_not_an_object_is_a_400_before_the_upstream(
    served: tuple[FakeUpstream, str], schema: dict[str, Any]
) -> None:
    fake, base = served
    before = len(fake.requests)
    tools: list[Any] = [{"name": "lookup", "description": "Look up.", "input_schema": schema}]
    with anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=30) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.create(model="m", max_tokens=64, tools=tools,
                                   messages=[{"role": "user", "content": "Look up Oslo."}])
    body = info.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    assert "lookup" in body["error"]["message"] and "object" in body["error"]["message"]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) as client:
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Look up Oslo."}],
                                           tools=[{"type": "function", "function": {"name": "lookup",
                                                                                    "parameters": schema}}])
    assert len(fake.requests) == before


def test_responses_call_without_its_output_names_input(served: tuple[FakeUpstream, str]) -> None:
    fake, base = served
    before = len(fake.requests)
    tools: list[Any] = [{"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
    items: list[Any] = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "call_id": "call_7", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
    ]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) as client:
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model="m", input=items, tools=tools)
    error = info.value.body
    assert isinstance(error, dict) and "call_7" in error["message"] and error["param"] == "input"
    assert len(fake.requests) == before
