"""Tools get an idempotency key (task id + call id), the same when a killed batch re-runs a task.

Defect: a killed batch re-runs the tools of the tasks that were in flight (at-least-once
execution) without telling the tool, which then cannot tell a retry from a new call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentfsm.core.config import RunConfig
from agentfsm.batch.task import Task, TaskSettings, ToolProvider, run_task
from agentfsm.core.messages import ToolCall, ToolSpec
from agentfsm.runtime.tools import ToolRegistry, current_idempotency_key, idempotency_scope
from agentfsm.testing import ScriptedBackend

#: (key, city) for every execution of ``book_table``
SEEN: list[tuple[str | None, str]] = []


def book_table(city: str, idempotency_key: str | None = None) -> str:
    """Book a table in a city (a side effect a retry must not repeat)."""
    SEEN.append((idempotency_key, city))
    return f"booked in {city}"


async def read_key(city: str) -> str:
    """An async tool without the parameter reads the key from the context."""
    return str(current_idempotency_key())


TOOLS = [book_table, read_key]


def _action(tool: str, **arguments: Any) -> str:
    return "```json action\n" + json.dumps({"tool": tool, "parameters": arguments}) + "\n```"


def test_the_key_is_not_part_of_the_tools_schema() -> None:
    spec = ToolSpec.from_callable(book_table)
    assert list(spec.parameters["properties"]) == ["city"]
    assert spec.parameters["required"] == ["city"]


def test_a_tool_gets_scope_and_call_id_and_the_models_own_value_is_replaced() -> None:
    registry = ToolRegistry(TOOLS)
    SEEN.clear()
    # the model cannot choose the key, even by naming the hidden parameter
    forged = ToolCall(id="call_3", name="book_table", arguments={"city": "Oslo", "idempotency_key": "x"})
    with idempotency_scope("task-7"):
        assert registry.execute(forged).content == "booked in Oslo"
        assert registry.execute(ToolCall(id="call_4", name="read_key", arguments={"city": "Oslo"})).content == "task-7/call_4"
    registry.execute(ToolCall(id="call_5", name="book_table", arguments={"city": "Rome"}))
    assert SEEN == [("task-7/call_3", "Oslo"), (None, "Rome")]  # no scope, no key
    assert current_idempotency_key() is None


def test_a_re_run_batch_task_gives_its_tools_the_same_keys() -> None:
    SEEN.clear()
    task = Task.model_validate({"id": "order-42", "prompt": "book two tables, in Paris and in Lyon", "tools": [
        {"type": "function", "function": {"name": "book_table", "parameters": ToolSpec.from_callable(book_table).parameters}},
    ]})
    settings = TaskSettings(tools_module=f"{__name__}:TOOLS", run=RunConfig(parallel=False))
    script = [_action("book_table", city="Paris"), _action("book_table", city="Lyon"), "Both booked."]
    for _ in range(2):  # the second run is what a killed-and-restarted batch does
        result = asyncio.run(run_task(task, ScriptedBackend(list(script)), settings, ToolProvider(settings.tools_module)))
        assert result.ok, result.error
    first, again = SEEN[:2], SEEN[2:]
    assert first == [("order-42/call_0", "Paris"), ("order-42/call_1", "Lyon")]
    assert again == first
