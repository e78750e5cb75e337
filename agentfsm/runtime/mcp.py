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
    """Start an MCP server (a shell-style command line) and yield its tools."""
    try:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError as exc:
        raise MissingExtraError("mcp", "loading tools from an MCP server") from exc
    argv = shlex.split(command)
    if not argv:
        raise UsageError("the MCP server command is empty")
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        listed = await session.list_tools()
        tools: list[RegisteredTool] = []
        for tool in listed.tools:
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
        yield tools
