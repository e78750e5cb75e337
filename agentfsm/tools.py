"""The tool registry: Python callables (sync or async) and MCP tools behind one interface.

A tool's exception becomes an ``error`` result, never a crash of the agent loop.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.errors import ToolExecutionError, ToolSpecError, UsageError
from agentfsm.messages import ToolCall, ToolResult, ToolSpec

__all__ = ["RegisteredTool", "ToolRegistry", "load_tools", "result_from_value"]

Executor = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class RegisteredTool:
    """A tool spec and the coroutine function that runs it."""

    spec: ToolSpec
    execute: Executor


def result_from_value(call: ToolCall, value: Any) -> ToolResult:
    """Turn what a tool returned into a ToolResult (``empty`` for None / blank)."""
    if value is None or (isinstance(value, str | list | dict | tuple) and len(value) == 0):
        return ToolResult(call_id=call.id, name=call.name, content="", status="empty")
    if isinstance(value, str):
        content = value
    else:
        try:
            content = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            content = str(value)
    if not content.strip():
        return ToolResult(call_id=call.id, name=call.name, content="", status="empty")
    return ToolResult(call_id=call.id, name=call.name, content=content)


def _wrap_callable(fn: Callable[..., Any]) -> Executor:
    async def run(args: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(**args)
        value = await asyncio.to_thread(fn, **args)
        if inspect.isawaitable(value):
            return await value
        return value

    return run


class ToolRegistry:
    """Tools by name. Build it from callables, ``(spec, executor)`` pairs, or MCP servers."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Any, *, name: str | None = None) -> ToolSpec:
        """Register a callable (schema from its type hints) or a :class:`RegisteredTool`."""
        if isinstance(tool, RegisteredTool):
            reg = tool
        elif callable(tool) and not isinstance(tool, ToolSpec | Mapping):
            reg = RegisteredTool(ToolSpec.from_callable(tool, name=name), _wrap_callable(tool))
        else:
            raise ToolSpecError(
                "a registry tool must be a callable or a RegisteredTool; a bare ToolSpec or "
                "tool dict has nothing to run (pass it to the engine or proxy instead)"
            )
        if reg.spec.name in self._tools:
            raise ToolSpecError(f"two tools are named {reg.spec.name!r}")
        self._tools[reg.spec.name] = reg
        return reg.spec

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self._tools.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __iter__(self) -> Iterator[RegisteredTool]:
        """The registered tools, in registration order."""
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """Run one call. Tool exceptions become ``error`` results."""
        tool = self._tools.get(call.name)
        if tool is None:
            raise ToolExecutionError(f"no tool named {call.name!r} in the registry")
        try:
            value = await tool.execute(dict(call.arguments))
        except Exception as exc:  # a tool's failure is a result the model should see
            return ToolResult(
                call_id=call.id,
                name=call.name,
                content=f"{type(exc).__name__}: {exc}",
                status="error",
            )
        return result_from_value(call, value)

    def execute(self, call: ToolCall) -> ToolResult:
        """Synchronous :meth:`aexecute` (not from inside a running event loop)."""
        return asyncio.run(self.aexecute(call))


def load_tools(ref: str) -> list[Any]:
    """Load tools from ``"package.module:ATTR"`` (a list of callables, or one callable)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise UsageError(f"tools reference must look like 'package.module:ATTR', got {ref!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import tools module {module_name!r}: {exc}") from exc
    try:
        value = getattr(module, attr)
    except AttributeError as exc:
        raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from exc
    if callable(value) and not isinstance(value, Sequence | ToolRegistry):
        return [value]
    if isinstance(value, ToolRegistry):
        return list(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    raise UsageError(f"{ref!r} is neither a callable nor a list of tools")
