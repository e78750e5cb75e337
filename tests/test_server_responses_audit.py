"""``POST /v1/responses`` as a demanding user of the official ``openai`` SDK drives it.

The proxy on 127.0.0.1 in front of a scripted FakeUpstream (json-action dialect), the
SDK's ``client.responses`` as the client: namespaced tools, stored-state items, and the
SDK's own output objects sent back as the next request's input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from agentfsm.testing import FakeUpstream
from tests._proxy import action, base, fake  # base, fake: fixtures

_CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER: Any = {"type": "function", "name": "get_weather", "description": "Weather in a city.",
                           "parameters": _CITY}
#: a namespace tool as Codex CLI sends its multi-agent tools: function tools grouped under a name
AGENTS: Any = {
    "type": "namespace", "name": "multi_agent_v1", "description": "Tools for managing sub-agents.",
    "tools": [
        {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent with a task.",
         "parameters": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
        {"type": "function", "name": "close_agent", "description": "Close a sub-agent.",
         "parameters": {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}},
    ],
}
ASK = "Have a sub-agent write the tests."


@pytest.fixture
def client(base: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) as c:
        yield c


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_namespaced_tool_is_offered_and_its_call_names_the_namespace(
    stream: bool, fake: FakeUpstream, client: openai.OpenAI, base: str
) -> None:
    """The tools of a ``namespace`` tool were passed over as if hosted: the model never saw
    Codex's spawn_agent, and a call to it was corrected as an unknown tool until the budget
    ran out (a 500)."""
    fake.enqueue(action("spawn_agent", message="write the tests"))
    tools: list[Any] = [WEATHER, AGENTS]
    final: Any
    if stream:
        with client.responses.stream(model="m", input=ASK, tools=tools) as events:
            added = [e.item for e in events if e.type == "response.output_item.added"]
            final = events.get_final_response()
        assert [(i.type, getattr(i, "namespace", None)) for i in added] == [("function_call", "multi_agent_v1")]
    else:
        final = client.responses.create(model="m", input=ASK, tools=tools)
    [call] = final.output
    assert call.type == "function_call" and call.name == "spawn_agent" and call.namespace == "multi_agent_v1"
    assert json.loads(call.arguments) == {"message": "write the tests"}
    contract = fake.chat_requests[0].messages[0]["content"]
    assert "spawn_agent" in contract and "close_agent" in contract and "get_weather" in contract

    # the next request sends the call back, with its output: read as the call and its result
    fake.enqueue("The sub-agent is on it.")
    history: list[Any] = [
        {"role": "user", "content": ASK}, *final.output,
        {"type": "function_call_output", "call_id": call.call_id, "output": "agent a1 started"},
    ]
    reply = httpx.post(f"{base}/v1/responses", timeout=30, json={
        "model": "m", "tools": tools,
        "input": [i if isinstance(i, dict) else i.model_dump(exclude_none=True) for i in history],
    })
    assert reply.status_code == 200, reply.text
    assert reply.json()["output"][0]["content"][0]["text"] == "The sub-agent is on it."
    assert "tools.namespace" not in reply.headers.get("x-agentfsm-ignored", "")
    assert "agent a1 started" in json.dumps(fake.chat_requests[-1].messages)


def test_a_namespaced_tool_whose_name_is_taken_keeps_the_first_meaning(fake: FakeUpstream, base: str) -> None:
    """The model sees one flat list: a namespace's tool named like a top-level tool is not
    offered twice (a duplicate name would be a 400), its call is the top-level one, and
    the namespace is named as not (wholly) honoured."""
    shadow = {**AGENTS, "tools": [{**AGENTS["tools"][0], "name": "get_weather"}, AGENTS["tools"][1]]}
    fake.enqueue(action("get_weather", city="Paris"))
    response = httpx.post(f"{base}/v1/responses", timeout=30,
                          json={"model": "m", "input": "Weather in Paris?", "tools": [WEATHER, shadow]})
    assert response.status_code == 200, response.text
    [item] = response.json()["output"]
    assert item["name"] == "get_weather" and "namespace" not in item
    assert "tools.namespace" in response.headers["x-agentfsm-ignored"].split(",")
    assert "close_agent" in fake.chat_requests[0].messages[0]["content"]


def test_a_malformed_namespace_is_a_400_naming_it(client: openai.OpenAI) -> None:
    bad: Any = {**AGENTS, "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "string"}}]}
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="m", input=ASK, tools=[bad])
    assert info.value.body["param"] == "tools[0].tools[0]"  # type: ignore[index]


def test_an_item_reference_is_a_400_naming_it(client: openai.OpenAI) -> None:
    """It names an item the proxy never stored (docs/proxy.md says so beside previous_response_id)."""
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="m", input=[{"role": "user", "content": "hi"}, {"type": "item_reference", "id": "msg_1"}])
    assert info.value.body["param"] == "input[1].type"  # type: ignore[index]
    assert "stores none" in info.value.message


def test_the_sdks_output_objects_are_the_next_input(fake: FakeUpstream, client: openai.OpenAI) -> None:
    """The SDK's documented loop, ``input += response.output``: its own objects (message
    and parallel function_call items, streamed) go back as they are."""
    fake.enqueue("Checking both.\n" + action("get_weather", city="Paris") + action("get_weather", city="Rome"),
                 "Both are at 18 C.")
    conversation: list[Any] = [{"role": "user", "content": "Weather in Paris and Rome?"}]
    with client.responses.stream(model="m", input=conversation, tools=[WEATHER]) as events:
        first = events.get_final_response()
    conversation += first.output
    calls = [item for item in first.output if item.type == "function_call"]
    assert [json.loads(c.arguments)["city"] for c in calls] == ["Paris", "Rome"]
    conversation += [{"type": "function_call_output", "call_id": c.call_id, "output": "18 C"} for c in calls]
    second = client.responses.create(model="m", input=conversation, tools=[WEATHER])
    assert second.output_text == "Both are at 18 C."
    assistant, results = fake.chat_requests[-1].messages[2:]
    assert assistant["content"].startswith("Checking both.") and "Rome" in assistant["content"]
    assert results["content"].count("18 C") == 2  # both results, in one turn
