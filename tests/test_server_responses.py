"""``POST /v1/responses`` driven by the official ``openai`` SDK (``client.responses``) over real HTTP.

Upstream: a scripted FakeUpstream on 127.0.0.1 answering in the json-action dialect.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from agentfsm.protocols import normalize_responses
from agentfsm.core.errors import RequestError
from agentfsm.core.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from agentfsm.testing import FakeUpstream, stream_no_terminator
from tests._proxy import action, base, fake, proxy, upstream_backend, wire_snapshot  # base, fake: fixtures

CODEX = Path(__file__).parent.parent / "fixtures" / "clients" / "codex_request.json"
_WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"],
}
TOOLS: list[Any] = [
    {"type": "function", "name": "get_weather", "description": "Weather in a city.", "parameters": _WEATHER},
    {"type": "function", "name": "get_time", "description": "Time in a zone.",
     "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}},
]
ASK = "What is the weather in Paris?"


@pytest.fixture
def client(base: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30) as c:
        yield c


def test_call_then_result_then_answer(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Checking.\n" + action("get_weather", city="Paris"), "It is 18 C in Paris.")
    first = client.responses.create(model="m", input=ASK, tools=TOOLS, instructions="Be brief.")
    assert first.status == "completed" and first.id.startswith("resp_")
    message, call = first.output
    assert message.type == "message" and message.content[0].text.strip() == "Checking."
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    assert first.usage is not None and first.usage.input_tokens > 0
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    sent = fake.chat_requests[0].messages
    assert "get_weather" in sent[0]["content"] and "Be brief." in json.dumps(sent)

    history: list[Any] = [
        {"role": "user", "content": ASK},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C and sunny"},
    ]
    second = client.responses.create(model="m", input=history, tools=TOOLS)
    assert second.output_text == "It is 18 C in Paris."
    assert [item.type for item in second.output] == ["message"]
    assert "18 C and sunny" in json.dumps(fake.chat_requests[1].messages)


def test_stream_events_in_order(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Let me see.\n" + action("get_weather", city="Paris", unit="c"))
    events = list(client.responses.create(model="m", input=ASK, tools=TOOLS, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text.strip() == "Let me see." and "{" not in text
    assert kinds.index("response.output_text.done") < kinds.index("response.function_call_arguments.delta")
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert [i.type for i in added] == ["message", "function_call"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments) == {"city": "Paris", "unit": "c"}
    final = events[-1].response
    assert [i.type for i in final.output] == ["message", "function_call"]
    assert final.usage is not None and final.usage.output_tokens > 0


def test_stream_helper_final_response(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(action("get_weather", city="Paris") + action("get_time", tz="CET"))
    with client.responses.stream(model="m", input=ASK, tools=TOOLS) as stream:
        deltas = [e.delta for e in stream if e.type == "response.function_call_arguments.delta"]
        final = stream.get_final_response()
    assert [json.loads(d) for d in deltas] == [{"city": "Paris"}, {"tz": "CET"}]
    calls = [i for i in final.output if i.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert len({c.call_id for c in calls}) == 2


def test_stream_plain_answer_and_no_tools(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue("Sunny, probably.", "hello back")
    with client.responses.stream(model="m", input=ASK, tools=TOOLS) as stream:
        final = stream.get_final_response()
    assert final.output_text == "Sunny, probably."
    events = list(client.responses.create(model="m", input="hi", stream=True, max_output_tokens=20))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "hello back"
    assert fake.chat_requests[1].body["max_tokens"] == 20


def test_tool_choice_and_parallel(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(
        "I think it is sunny.",
        action("get_weather", city="Paris"),
        action("get_time", tz="CET"),
        action("get_weather", city="Paris") + action("get_weather", city="Rome"),
    )
    required = client.responses.create(model="m", input=ASK, tools=TOOLS, tool_choice="required")
    assert [i.type for i in required.output] == ["function_call"] and len(fake.chat_requests) == 2
    forced = client.responses.create(
        model="m", input=ASK, tools=TOOLS, tool_choice={"type": "function", "name": "get_time"}
    )
    assert forced.output[-1].name == "get_time"
    single = client.responses.create(model="m", input=ASK, tools=TOOLS, parallel_tool_calls=False)
    assert [json.loads(i.arguments)["city"] for i in single.output] == ["Paris"]


def test_text_format_becomes_response_format() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    fmt = {"type": "json_schema", "name": "City", "schema": schema, "strict": True}
    request = normalize_responses({"input": "Name a city.", "text": {"format": fmt}})
    # carried as the chat-completions parameter, for the upstream
    assert request.response_format == {
        "type": "json_schema", "json_schema": {"name": "City", "schema": schema, "strict": True}
    }
    plain = normalize_responses({"input": "hi", "text": {"format": {"type": "text"}}})
    assert plain.response_format is None


def test_parse_with_text_format_goes_upstream(fake: FakeUpstream, client: openai.OpenAI) -> None:
    class City(BaseModel):
        city: str
        population: int

    fake.enqueue('{"city": "Paris", "population": 2100000}')
    parsed = client.responses.parse(model="m", input="Name a big city.", text_format=City)
    assert parsed.output_parsed == City(city="Paris", population=2100000)
    fmt = fake.chat_requests[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "City"


def test_async_client_call_and_stream(fake: FakeUpstream, base: str) -> None:
    fake.enqueue(action("get_weather", city="Oslo"), "Cold.")

    async def run() -> tuple[Any, str]:
        async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0) as c:
            whole = await c.responses.create(model="m", input=ASK, tools=TOOLS)
            stream = await c.responses.create(model="m", input=ASK, tools=TOOLS, stream=True)
            text = "".join([e.delta async for e in stream if e.type == "response.output_text.delta"])
            return whole, text

    whole, text = asyncio.run(run())
    assert json.loads(whole.output[0].arguments) == {"city": "Oslo"}
    assert text == "Cold."


def test_client_errors_are_openai_shaped_400s(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="m", input="hi", previous_response_id="resp_123")
    assert "stores no responses" in info.value.message
    assert info.value.body["param"] == "previous_response_id"  # type: ignore[index]
    orphan = [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]
    with pytest.raises(openai.BadRequestError, match="answers no earlier function_call"):
        client.responses.create(model="m", input=orphan, tools=TOOLS)
    image = [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]
    with pytest.raises(openai.BadRequestError, match="input_image"):
        client.responses.create(model="m", input=image)


def test_budget_spent_is_500_and_mid_stream_failure_is_response_failed(
    fake: FakeUpstream, client: openai.OpenAI, base: str
) -> None:
    fake.enqueue(*["no tools here, sorry"] * 4)
    with pytest.raises(openai.InternalServerError) as info:
        client.responses.create(model="m", input=ASK, tools=TOOLS, tool_choice="required")
    assert set(info.value.response.json()["error"]) == {"message", "type", "param", "code"}
    assert info.value.response.json()["error"]["type"] == "server_error"
    fake.enqueue(stream_no_terminator("Some prose that streams before the upstream dies"))
    body = {"model": "m", "input": ASK, "tools": TOOLS, "stream": True}
    held = httpx.post(f"{base}/v1/responses", json=body, timeout=30)  # prose held: nothing sent yet
    assert held.status_code == 502 and held.json()["error"]["type"] == "upstream_error"
    fake.enqueue(stream_no_terminator("Some prose that streams before the upstream dies"))
    with proxy(upstream_backend(fake), stream_prose="live") as live:
        with httpx.stream("POST", f"{live}/v1/responses", json=body, timeout=30) as r:
            assert r.status_code == 200
            kinds = [line[7:] for line in r.iter_lines() if line.startswith("event: ")]
    assert kinds[0] == "response.created" and "response.output_text.delta" in kinds
    assert kinds[-2:] == ["error", "response.failed"] and "response.completed" not in kinds


def test_codex_request_is_served(fake: FakeUpstream, base: str) -> None:
    """Codex CLI's captured first request: developer messages, namespace and web_search tools."""
    body = json.loads(CODEX.read_text())["body"]
    fake.enqueue(action("exec_command", cmd="echo hi > hello.txt"))
    with httpx.stream("POST", f"{base}/v1/responses", json=body, timeout=30) as r:
        text = r.read().decode()
    assert r.status_code == 200, text
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert done[-1]["item"]["name"] == "exec_command"
    assert json.loads(done[-1]["item"]["arguments"]) == {"cmd": "echo hi > hello.txt"}
    assert events[-1]["type"] == "response.completed"
    contract = fake.chat_requests[0].messages[0]["content"]
    assert "exec_command" in contract and "web_search" not in contract


def test_normalize_items() -> None:
    request = normalize_responses(
        {
            "instructions": "sys",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
                {"role": "user", "content": "q"},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x": 1}'},
                {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
                {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]},
            ],
            "tools": [{"type": "web_search"}],
            "top_p": 0.5,
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
    )
    kinds = [type(m) for m in request.messages]
    assert kinds == [SystemMessage, SystemMessage, UserMessage, AssistantMessage, ToolMessage, ToolMessage]
    assistant = request.messages[3]
    assert isinstance(assistant, AssistantMessage) and assistant.content == "a"
    assert [c.id for c in assistant.tool_calls] == ["c1", "c2"]
    # no function tools given: recovered from the history, so the contract still applies
    assert request.tools_recovered and [t.name for t in request.tools] == ["f"]
    assert request.top_p == 0.5 and request.protocol == "responses"
    assert request.ignored == ("include", "tools.web_search", "input.reasoning")
    with pytest.raises(RequestError, match="stores none"):
        normalize_responses({"input": [{"type": "item_reference", "id": "msg_1"}]})


def test_wire_payloads_match_snapshot(fake: FakeUpstream, base: str, snapshot: Any) -> None:
    fake.enqueue(
        "Checking both.\n" + action("get_weather", city="Paris") + action("get_time", tz="CET"),
        "Looking it up.\n" + action("get_weather", city="Rome"),
    )
    body = {"model": "fake-model", "input": ASK, "tools": TOOLS}
    assert wire_snapshot(base, "/v1/responses", body) == snapshot


# -- what real clients send: bookkeeping items, unknown items, custom tools, images ------------

#: Codex CLI 0.169's request after create_goal (input[6] has no call_id: its own bookkeeping)
CODEX_AFTER_GOAL: list[Any] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Set a goal to create goal.txt"}]},
    {"type": "function_call", "status": "completed", "id": "fc_1", "name": "create_goal",
     "arguments": '{"objective":"Create the file goal.txt"}', "call_id": "call_1"},
    {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": '{"goal":{"status":"active"}}'},
    {"type": "function_call_output", "id": "fco_2", "name": "goal_objective", "namespace": "agent",
     "output": "Create the file goal.txt"},
]
GOAL_TOOLS: list[Any] = [
    {"type": "function", "name": "create_goal", "description": "Create a goal.",
     "parameters": {"type": "object", "properties": {"objective": {"type": "string"}}, "required": ["objective"]}},
    {"type": "function", "name": "exec_command", "description": "Runs a command.",
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
]


def test_an_output_without_call_id_is_kept_as_context_not_a_400() -> None:
    request = normalize_responses({"input": CODEX_AFTER_GOAL, "tools": GOAL_TOOLS})
    kinds = [type(m) for m in request.messages]
    assert kinds == [UserMessage, AssistantMessage, ToolMessage, SystemMessage]
    note = request.messages[-1]
    assert isinstance(note, SystemMessage) and note.content == "agent.goal_objective: Create the file goal.txt"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_codex_create_goal_history_is_answered(stream: bool, fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.enqueue(action("exec_command", cmd="touch goal.txt"))
    if stream:
        with client.responses.stream(model="m", input=CODEX_AFTER_GOAL, tools=GOAL_TOOLS) as events:
            final = events.get_final_response()
    else:
        final = client.responses.create(model="m", input=CODEX_AFTER_GOAL, tools=GOAL_TOOLS)
    [call] = [i for i in final.output if i.type == "function_call"]
    assert call.name == "exec_command"
    system = fake.chat_requests[0].messages[0]["content"]
    assert "agent.goal_objective: Create the file goal.txt" in system


def test_unknown_input_items_are_passed_over_and_named() -> None:
    request = normalize_responses({"input": [
        {"role": "user", "content": "q"},
        {"type": "local_shell_call", "call_id": "s1", "action": {"type": "exec", "command": ["ls"]}},
        {"type": "compaction", "encrypted_content": "..."},
    ]})
    assert [type(m) for m in request.messages] == [UserMessage]
    assert set(request.ignored) == {"input.local_shell_call", "input.compaction"}


APPLY_PATCH: dict[str, Any] = {
    "type": "custom", "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files. This is a FREEFORM tool.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF'},
}
PATCH = "*** Begin Patch\n*** Add File: hi.txt\n+hi\n*** End Patch\n"


def test_a_custom_tool_is_offered_with_one_raw_text_parameter() -> None:
    request = normalize_responses({"input": "edit", "tools": [APPLY_PATCH]})
    [spec] = request.tools
    assert spec.name == "apply_patch" and spec.parameters["required"] == ["input"]
    assert spec.parameters["properties"]["input"]["type"] == "string"
    assert "lark grammar" in spec.parameters["properties"]["input"]["description"]
    assert request.custom_tools == ("apply_patch",) and "tools.custom" not in request.ignored


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_custom_tool_call_comes_back_as_a_custom_tool_call_item(
    stream: bool, fake: FakeUpstream, client: openai.OpenAI
) -> None:
    fake.enqueue(action("apply_patch", input=PATCH))
    tools: list[Any] = [APPLY_PATCH, *TOOLS]
    if stream:
        with client.responses.stream(model="m", input=ASK, tools=tools) as events:
            kinds = [e.type for e in events]
            final = events.get_final_response()
        assert "response.custom_tool_call_input.done" in kinds
        assert "response.function_call_arguments.delta" not in kinds
    else:
        final = client.responses.create(model="m", input=ASK, tools=tools)
    [item] = final.output
    assert item.type == "custom_tool_call" and item.name == "apply_patch" and item.input == PATCH
    # the next request sends it back with its output: read as the call and its result
    fake.enqueue("Patched.")
    history = [{"role": "user", "content": ASK}, {"type": "custom_tool_call", "call_id": item.call_id, "name": "apply_patch", "input": PATCH},
               {"type": "custom_tool_call_output", "call_id": item.call_id, "output": "Done!"}]
    after = client.responses.create(model="m", input=history, tools=tools)
    assert after.output_text == "Patched."
    assert "Done!" in fake.chat_requests[-1].messages[-1]["content"]


def test_an_image_in_a_tool_output_is_a_placeholder_named_in_the_header(fake: FakeUpstream, base: str) -> None:
    fake.enqueue("It is a red square.")
    body = {"model": "m", "tools": TOOLS, "input": [
        {"role": "user", "content": ASK},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_text", "text": "see picture"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
    ]}
    response = httpx.post(f"{base}/v1/responses", json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert "function_call_output.input_image" in response.headers["x-agentfsm-ignored"]
    assert "[image omitted: this model reads text only]" in fake.chat_requests[0].messages[-1]["content"]
