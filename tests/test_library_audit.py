"""What a program embedding agentfsm meets: tools of every Python shape, misuse that must
be a typed error, a run inside a running event loop, a conversation given as dicts."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import functools
import json
import math
from typing import Any

import pytest
from pydantic import BaseModel

from agentfsm import Agent, ScriptedBackend, ToolRegistry, ToolSpec, UsageError
from agentfsm.core.errors import ToolSpecError
from agentfsm.core.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from agentfsm.runtime.tools import result_from_value
from agentfsm.protocols import read_conversation


def call(name: str, **args: Any) -> str:
    return "```json action\n" + json.dumps({"tool": name, "args": args}) + "\n```"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: int


def run_tool(tool: Any, arguments: dict[str, Any], *, name: str | None = None) -> str:
    registry = ToolRegistry()
    spec = registry.add(tool, name=name)
    result = registry.execute(ToolCall(id="c0", name=spec.name, arguments=arguments))
    assert result.status == "ok", result.content
    return result.content


# -- arguments arrive as the declared types --------------------------------------------
def describe(color: Color, point: Point, box: Box, day: datetime.date, n: float = 1) -> str:
    """Types JSON does not have."""
    return f"{color!r} {point!r} {box!r} {day!r} {n!r}"


def test_arguments_become_the_declared_non_json_types() -> None:
    out = run_tool(describe, {"color": "red", "point": {"x": 1, "y": 2}, "box": {"width": 3}, "day": "2020-01-02", "n": 4})
    # n: float stays the 4 the model wrote (JSON types are passed as written)
    assert out == "<Color.RED: 'red'> Point(x=1, y=2) Box(width=3) datetime.date(2020, 1, 2) 4"


def test_an_argument_that_does_not_validate_is_passed_as_written() -> None:
    def show(color: Color) -> str:
        return repr(color)

    assert run_tool(show, {"color": "green"}) == "'green'"


# -- callables of every shape -------------------------------------------------------------
def power(base: float, exp: int = 2) -> float:
    """Raise base to exp."""
    return base**exp


class Counter:
    def __call__(self, x: int) -> int:
        return x + 1


def positional_only(x: int, /, y: int = 0) -> int:
    return x + y


def test_partial_and_callable_object_with_a_name() -> None:
    registry = ToolRegistry()
    spec = registry.add(functools.partial(power, exp=3), name="cube")
    assert spec.description == "Raise base to exp."  # not functools.partial's docstring
    assert spec.parameters["properties"]["base"] == {"type": "number"}
    assert registry.execute(ToolCall(id="c", name="cube", arguments={"base": 2})).content == "8"
    assert run_tool(Counter(), {"x": 1}, name="counter") == "2"


def test_positional_only_parameters_are_passed_by_position() -> None:
    assert run_tool(positional_only, {"x": 1, "y": 2}) == "3"
    assert run_tool(math.sqrt, {"x": 4}) == "2.0"


@pytest.mark.parametrize("name", ["", " ", "my tool", "1abc", "a\"b", "line\nbreak", "é", "x" * 129])
def test_a_name_no_dialect_can_write_is_refused(name: str) -> None:
    with pytest.raises(ToolSpecError):
        ToolRegistry().add(add, name=name)


@pytest.mark.parametrize("name", ["add2", "a-b", "ns.tool", "_x", "x" * 128])
def test_names_every_dialect_writes_are_taken(name: str) -> None:
    assert ToolRegistry().add(add, name=name).name == name


class Opaque:
    pass


def opaque(y: int, x: Opaque) -> int:
    return y


def test_an_annotation_without_a_schema_names_the_parameter() -> None:
    with pytest.raises(ToolSpecError, match="parameter 'x' is annotated Opaque"):
        ToolSpec.from_callable(opaque)


# -- what a tool returns ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "content"),
    [
        (datetime.datetime(2020, 1, 1, 12), "2020-01-01T12:00:00"),
        (Box(2), '{"width": 2}'),
        (Point(x=1, y=2), '{"x": 1, "y": 2}'),
        ({1, 2}, "[1, 2]"),
        (Color.BLUE, "blue"),
        ({"when": datetime.date(2020, 1, 1), "n": 1.5}, '{"when": "2020-01-01", "n": 1.5}'),
        ({"a": [1, "é"]}, '{"a": [1, "é"]}'),  # plain JSON exactly as before
        (12.0, "12.0"),
    ],
)
def test_returned_values_are_written_as_json(value: Any, content: str) -> None:
    assert result_from_value(ToolCall(id="c", name="t"), value).content == content


# -- the agent's inputs ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tools": "add"}, "tools must be a list"),
        ({"tools": add}, "tools must be a list"),
        ({"system": 3}, "system must be a string"),
        ({"options": 3}, "options must be GenerationOptions"),
        ({"options": {"temperature": "hot"}}, "options.temperature"),
        ({"backend": "openai"}, "backend must be a Backend"),
        ({"transcript": 3}, "transcript must be a file path"),
        ({"event_types": ["nope"]}, "unknown event type"),
        ({"config": {"dialect": "command"}}, "config must be a RunConfig"),
    ],
)
def test_agent_misuse_is_a_usage_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        Agent(**({"backend": ScriptedBackend(["hi"])} | kwargs))


def test_agent_takes_no_tools_and_options_as_a_dict() -> None:
    backend = ScriptedBackend(["hi"])
    assert Agent(backend, tools=None, options={"max_tokens": 7}).run("hello").content == "hi"
    assert backend.requests[0].options.max_tokens == 7


@pytest.mark.parametrize("prompt", [None, 42, {"role": "user", "content": "hi"}])
def test_a_prompt_that_is_no_conversation_is_a_usage_error(prompt: Any) -> None:
    with pytest.raises(UsageError, match="prompt must be a string or a list of messages"):
        Agent(ScriptedBackend(["hi"])).run(prompt)


@pytest.mark.parametrize(
    "history",
    [
        [  # the OpenAI chat shape
            {"role": "user", "content": "add 1 and 2"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
        ],
        [  # agentfsm's own
            {"role": "user", "content": "add 1 and 2"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}]},
            {"role": "tool", "result": {"call_id": "c1", "content": "3", "name": "add"}},
        ],
    ],
)
def test_a_conversation_of_dicts_reaches_the_model(history: list[dict[str, Any]]) -> None:
    backend = ScriptedBackend(["It is 3."])
    openai_shaped = "function" in history[1]["tool_calls"][0]
    if openai_shaped:  # the runtime reads its own shape; the protocols layer reads OpenAI's
        with pytest.raises(UsageError, match=r"messages\[1\]\.assistant\.tool_calls.*read_conversation"):
            Agent(backend, tools=[add]).run(history)
        history = read_conversation(history)  # type: ignore[assignment]
    result = Agent(backend, tools=[add]).run(history)
    sent = backend.requests[0].messages
    assert [m.role for m in sent][:3] == ["system", "user", "assistant"]  # they were dropped: only the contract went
    assert sent[1].content == "add 1 and 2"
    assert [type(m) for m in result.messages] == [UserMessage, AssistantMessage, ToolMessage, AssistantMessage]


# -- event loops ------------------------------------------------------------------------------
async def test_run_inside_a_running_loop_is_a_usage_error_and_leaves_no_coroutine() -> None:
    # the test runs with warnings as errors: an unawaited coroutine would fail it
    with pytest.raises(UsageError, match=r"await agent\.arun"):
        Agent(ScriptedBackend(["hi"])).run("hello")
    with pytest.raises(UsageError, match="await aexecute"):
        ToolRegistry([add]).execute(ToolCall(id="c", name="add", arguments={"a": 1, "b": 2}))
    assert (await Agent(ScriptedBackend(["hi"])).arun("hello")).content == "hi"


async def test_concurrent_runs_on_one_agent_keep_their_own_conversation() -> None:
    async def slow_add(a: int, b: int) -> int:
        """Add, slowly."""
        await asyncio.sleep(0.01)
        return a + b

    def reply(messages: Any) -> str:
        users = [m.content for m in messages if m.role == "user"]
        if len(users) > 1:
            return "done"
        return call("slow_add", a=int(users[0].split()[-1]), b=1)

    agent = Agent(ScriptedBackend(reply), tools=[slow_add])
    results = await asyncio.gather(*(agent.arun(f"add one to {k}") for k in range(8)))
    for k, result in enumerate(results):
        assert [c["result"]["content"] for c in result.tool_calls] == [str(k + 1)]
        assert result.messages[0].content == f"add one to {k}"


def test_runs_sharing_a_transcript_find_their_own_run(tmp_path: Path) -> None:
    from agentfsm.runtime.transcript import read_transcript

    path = tmp_path / "shared.jsonl"
    agent = Agent(ScriptedBackend(["one", "two"]), transcript=path)
    first, second = agent.run("a"), agent.run("b")
    assert first.run_id and second.run_id and first.run_id != second.run_id
    runs = {e["run"] for e in read_transcript(path)}
    assert runs == {first.run_id, second.run_id}
    assert Agent(ScriptedBackend(["x"])).run("a").run_id is None  # nothing recorded
