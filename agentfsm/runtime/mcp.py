"""Tools from MCP servers over stdio (needs the ``mcp`` extra).

``async with mcp_tools("python my_server.py") as tools:`` starts the server, lists
its tools and yields them as :class:`~agentfsm.runtime.tools.RegisteredTool` values that call
back into the live session; the server stops when the block exits.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from agentfsm.core.errors import MCPToolError, MissingExtraError, UsageError
from agentfsm.core.messages import ToolSpec
from agentfsm.runtime.tools import RegisteredTool

__all__ = ["MCPToolError", "mcp_tools"]


def _text_of(content: Any) -> str:
    parts: list[str] = []
    for block in content or []:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} block]")
    return "\n".join(parts)


@asynccontextmanager
async def mcp_tools(command: str) -> AsyncIterator[list[RegisteredTool]]:
    """Start an MCP server (a shell-style command line) and yield its tools.

    A server that cannot start (no such command, it exits at once, it does not answer
    as an MCP server) is a :class:`UsageError` naming the command and the reason."""
    try:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError as exc:
        raise MissingExtraError("mcp", "loading tools from an MCP server") from exc
    try:
        argv = shlex.split(command)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"MCP server command {command!r}: {exc}") from exc
    if not argv:
        raise UsageError("the MCP server command is empty")
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    started = False
    raised: BaseException | None = None  # by the caller's block
    try:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            listed = await session.list_tools()
            started = True
            try:
                yield _registered(session, listed.tools)
            except BaseException as exc:
                raised = exc
                raise
    except Exception as exc:  # an ExceptionGroup from the client's task groups, too
        if raised is not None and exc is not raised and _holds(exc, raised):
            # the client's task groups wrap the caller's own error: hand it back as it was
            raise raised from raised.__cause__
        if started:
            raise  # the server's own failure, after it served
        raise UsageError(f"MCP server {command!r} did not start: {_reason(exc)}") from exc


def _holds(group: BaseException, exc: BaseException) -> bool:
    """Whether ``exc`` is ``group`` or inside it (exception groups, nested)."""
    if group is exc:
        return True
    return isinstance(group, BaseExceptionGroup) and any(_holds(e, exc) for e in group.exceptions)


def _reason(exc: BaseException) -> str:
    """The first real error inside ``exc`` (the client wraps them in exception groups), in words."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"not allowed to run it: {exc.filename or exc}"
    text = str(exc) or type(exc).__name__
    if text == "Connection closed":  # the client's word for a server that went away
        return "it exited, or closed its output, before it answered"
    return f"{type(exc).__name__}: {text}"


def _registered(session: Any, listed: Any) -> list[RegisteredTool]:
    """The server's listed tools, each calling back into ``session``."""
    tools: list[RegisteredTool] = []
    for tool in listed:
        spec = ToolSpec(
            name=tool.name,
            description=tool.description or "",
            parameters=dict(tool.inputSchema or {"type": "object", "properties": {}}),
        )

        async def execute(args: dict[str, Any], _name: str = tool.name) -> Any:
            result = await session.call_tool(_name, args)
            text = _text_of(result.content)
            if result.isError:
                raise MCPToolError(text or f"MCP tool {_name!r} failed")
            return text

        tools.append(RegisteredTool(spec, execute))
    return tools
