import asyncio
from pathlib import Path

import pytest

from agentfsm.core.errors import ToolExecutionError, ToolSpecError, UsageError
from agentfsm.core.messages import ToolCall
from agentfsm.runtime.tools import ToolRegistry, load_tools, result_from_value


def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


async def slow_echo(text: str) -> str:
    """Echo text, asynchronously."""
    await asyncio.sleep(0)
    return text


def boom(x: str) -> str:
    """Always fails."""
    raise RuntimeError(f"bad {x}")


def nothing() -> None:
    """Returns nothing."""


def test_schema_comes_from_type_hints() -> None:
    reg = ToolRegistry([add])
    spec = reg.specs[0]
    assert spec.name == "add" and spec.description == "Add two integers."
    assert spec.parameters["required"] == ["a"]
    assert spec.parameters["properties"]["a"] == {"type": "integer"}


def test_sync_async_error_and_empty_results() -> None:
    reg = ToolRegistry([add, slow_echo, boom, nothing])
    assert reg.execute(ToolCall(id="c1", name="add", arguments={"a": 1})).content == "3"
    assert reg.execute(ToolCall(id="c2", name="slow_echo", arguments={"text": "hi"})).content == "hi"
    err = reg.execute(ToolCall(id="c3", name="boom", arguments={"x": "y"}))
    assert err.status == "error" and "RuntimeError: bad y" in err.content
    empty = reg.execute(ToolCall(id="c4", name="nothing", arguments={}))
    assert empty.status == "empty" and empty.call_id == "c4"
    bad_args = reg.execute(ToolCall(id="c5", name="add", arguments={"zzz": 1}))
    assert bad_args.status == "error"


def test_unknown_tool_and_duplicates_are_typed_errors() -> None:
    reg = ToolRegistry([add])
    with pytest.raises(ToolExecutionError):
        reg.execute(ToolCall(id="c", name="nope", arguments={}))
    with pytest.raises(ToolSpecError):
        reg.add(add)
    with pytest.raises(ToolSpecError):
        reg.add({"name": "x"})


def test_result_from_value_serialises_json() -> None:
    call = ToolCall(id="c", name="t", arguments={})
    assert result_from_value(call, {"a": 1}).content == '{"a": 1}'
    assert result_from_value(call, []).status == "empty"


def test_load_tools_references() -> None:
    tools = load_tools("agentfsm.testing.example_tools:TOOLS")
    assert [t.__name__ for t in tools] == ["multiply", "convert_km_to_miles"]
    assert [t.__name__ for t in load_tools("agentfsm.testing.example_tools:CALCULATOR")] == ["calculate", "convert_units"]
    for bad in ("nomodule", "agentfsm.nope_module:X", "agentfsm.testing.example_tools:NOPE"):
        with pytest.raises(UsageError):
            load_tools(bad)


def test_example_tools_compute() -> None:
    from agentfsm.testing.example_tools import calculate, convert_km_to_miles, convert_units, multiply

    assert multiply(12.5, 4) == 50.0
    assert convert_km_to_miles(50) == 31.07
    assert calculate("12.5 * 4") == 50.0
    assert convert_units(50, "km", "mi") == pytest.approx(31.0686, abs=1e-3)
    with pytest.raises(ValueError):
        calculate("__import__('os')")


MCP_SERVER = '''
from mcp.server.fastmcp import FastMCP

server = FastMCP("demo")


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


server.run()
'''


def test_mcp_tools_over_stdio(tmp_path: Path) -> None:
    import sys

    from agentfsm.runtime.mcp import mcp_tools

    script = tmp_path / "server.py"
    script.write_text(MCP_SERVER)

    async def go() -> tuple[list[str], str, str]:
        async with mcp_tools(f"{sys.executable} {script}") as tools:
            reg = ToolRegistry(tools)
            ok = await reg.aexecute(ToolCall(id="c1", name="multiply", arguments={"a": 6, "b": 7}))
            bad = await reg.aexecute(ToolCall(id="c2", name="fail", arguments={"reason": "nope"}))
            assert reg.specs[0].parameters["properties"]["a"]["type"] == "integer"
            return list(reg.names), ok.content, bad.status

    names, content, status = asyncio.run(go())
    assert names == ["multiply", "fail"]
    assert content == "42"
    assert status == "error"


def test_agent_runs_mcp_tools_beside_python_tools(tmp_path: Path) -> None:
    import sys

    from agentfsm import Agent, ScriptedBackend

    script = tmp_path / "server.py"
    script.write_text(MCP_SERVER)
    call = '```json action\n{"tool": "multiply", "args": {"a": 6, "b": 7}}\n```'
    backend = ScriptedBackend([call, "42"])
    result = Agent(backend, [add], mcp=[f"{sys.executable} {script}"]).run("6 times 7?")
    assert result.content == "42"
    assert result.tool_calls[0]["result"]["content"] == "42"
    assert "add" in backend.requests[0].messages[0].content and "multiply" in backend.requests[0].messages[0].content
