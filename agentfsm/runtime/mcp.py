"""Tools from MCP servers over stdio (needs the ``mcp`` extra).

``async with mcp_tools("python my_server.py") as tools:`` starts the server, lists
its tools and yields them as :class:`~agentfsm.runtime.tools.RegisteredTool` values that call
back into the live session; the server stops when the block exits. An
:class:`~agentfsm.runtime.agent.Agent` starts its servers for each run
(:func:`with_servers`), or once for all the runs of an ``async with agent:`` block
(:class:`HeldServers`: ``agentfsm chat`` keeps a stateful server's state across turns).

A server has a start-up timeout (:data:`START_TIMEOUT`, generous because an ``npx``
server may install itself first; ``start_timeout=``, or an
:class:`~agentfsm.runtime.agent.Agent`'s ``mcp_start_timeout=``, to change it) to answer the MCP handshake and list its tools. Past it, the server is
stopped and the start is a :class:`UsageError`. While a server starts, the ``mcp``
library's own log records (a traceback for each line of output that is not MCP, a
warning for each message it cannot read) are held back: the error says it in one line.

The ``mcp`` client's session module logs through the ``logging`` module's own functions
(``logging.warning(...)``), and the first such call in a process whose root logger has no
handler runs ``logging.basicConfig()``: the root logger of the program that embeds
agentfsm would be configured by us. Those calls are sent to the named logger
``mcp.shared.session`` instead (:func:`_named_session_logs`): the records are the same, at
the same levels, and reach the program's own handlers, or Python's last-resort output on
stderr when it has none.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from typing import Any

from agentfsm.core.errors import MCPToolError, MissingExtraError, UsageError
from agentfsm.core.messages import ToolSpec
from agentfsm.runtime.tools import RegisteredTool, ToolRegistry

__all__ = ["START_TIMEOUT", "HeldServers", "MCPToolError", "check_start_timeout", "mcp_tools", "with_servers"]

#: seconds a server has, by default, to answer the handshake and list its tools
START_TIMEOUT = 60.0

#: the module of the ``mcp`` client that logs through ``logging``'s module-level functions
_SESSION_MODULE = "mcp.shared.session"
#: the loggers the ``mcp`` client writes to while a server starts (the session's own: :func:`_named_session_logs`)
_LIBRARY_LOGGERS = (_SESSION_MODULE, "mcp.client.stdio", "mcp.os.posix.utilities")


def check_start_timeout(seconds: float) -> float:
    """``seconds`` as a start-up timeout; 0 or less (or NaN) is a :class:`UsageError`."""
    if not seconds > 0:  # NaN as well
        raise UsageError(f"the MCP start-up timeout must be more than 0 seconds, got {seconds}")
    return float(seconds)


class _Start:
    """One server's start-up, in the context of the client's tasks (which copy it when
    they start): their log records are told apart from any other session's."""

    def __init__(self) -> None:
        self.going = True
        #: the first output of the server's that was not MCP, in words
        self.stray: str | None = None

    async def note(self, message: Any) -> None:
        """The session's message handler: it receives the client's parse errors."""
        if isinstance(message, Exception) and self.stray is None:
            self.stray = _not_mcp(message)


_start: ContextVar[_Start | None] = ContextVar("mcp_start", default=None)


class _HeldWhileStarting(logging.Filter):
    """Drops the records logged for a server that is still starting."""

    def filter(self, record: logging.LogRecord) -> bool:
        start = _start.get()
        return start is None or not start.going


class _NamedLogging:
    """Stands for the ``logging`` module inside the ``mcp`` session module: its logging
    functions write to ``logger`` (never to the root logger, so never through
    ``logging.basicConfig``); every other name is the module's own."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def __getattr__(self, name: str) -> Any:
        return getattr(logging, name)

    # stacklevel=2: the record names the mcp line that logged it, not this one
    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.debug(msg, *args, stacklevel=2, **kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.info(msg, *args, stacklevel=2, **kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.warning(msg, *args, stacklevel=2, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.error(msg, *args, stacklevel=2, **kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.exception(msg, *args, stacklevel=2, **kwargs)

    def critical(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.critical(msg, *args, stacklevel=2, **kwargs)

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        self._logger.log(level, msg, *args, stacklevel=2, **kwargs)


def _named_session_logs() -> None:
    """Send the ``mcp`` session module's ``logging.warning(...)`` calls to its named logger."""
    import importlib

    module = importlib.import_module(_SESSION_MODULE)
    if not isinstance(getattr(module, "logging", None), _NamedLogging):
        setattr(module, "logging", _NamedLogging(logging.getLogger(_SESSION_MODULE)))


def _hold_library_logs() -> None:
    for name in _LIBRARY_LOGGERS:
        std = logging.getLogger(name)
        if not any(isinstance(f, _HeldWhileStarting) for f in std.filters):
            std.addFilter(_HeldWhileStarting())


def _not_mcp(exc: Exception) -> str:
    """What the client could not read as MCP, in words: the line, as its parse error holds it."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        for error in exc.errors():
            if error["type"] == "json_invalid" and isinstance(error["input"], str):
                line: str = error["input"]
                return repr(line if len(line) <= 80 else line[:77] + "...")
        return "JSON that is not a JSON-RPC message"
    return f"{type(exc).__name__}: {exc}"


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
async def mcp_tools(command: str, *, start_timeout: float = START_TIMEOUT) -> AsyncIterator[list[RegisteredTool]]:
    """Start an MCP server (a shell-style command line) and yield its tools.

    ``start_timeout``: seconds it has to answer the handshake and list its tools
    (:data:`START_TIMEOUT` by default).
    A server that cannot start (no such command, it exits at once, it does not answer
    as an MCP server in time) is stopped and is a :class:`UsageError` naming the
    command and the reason."""
    try:
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
    except ImportError as exc:
        raise MissingExtraError("mcp", "loading tools from an MCP server") from exc
    seconds = check_start_timeout(start_timeout)
    try:
        argv = shlex.split(command)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"MCP server command {command!r}: {exc}") from exc
    if not argv:
        raise UsageError("the MCP server command is empty")
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    _named_session_logs()
    _hold_library_logs()
    start = _Start()
    started = timed_out = False
    raised: BaseException | None = None  # by the caller's block
    try:
        async with AsyncExitStack() as stack:
            token = _start.set(start)  # the client's tasks, started here, copy it
            try:
                read, write = await stack.enter_async_context(stdio_client(params))
                session = await stack.enter_async_context(ClientSession(read, write, message_handler=start.note))
            finally:
                _start.reset(token)
            try:
                with anyio.fail_after(seconds):
                    await session.initialize()
                    listed = await session.list_tools()
            except TimeoutError:
                timed_out = True  # unwinding the stack stops the server (its process group)
                raise
            started, start.going = True, False
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
        reason = f"no MCP answer within the start-up timeout of {seconds:g} s" if timed_out else _reason(exc)
        if start.stray is not None:
            reason += f"; its output was not MCP: {start.stray}"
        raise UsageError(f"MCP server {command!r} did not start: {reason}") from exc


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


async def with_servers(
    stack: AsyncExitStack, base: ToolRegistry, commands: Sequence[str], start_timeout: float
) -> ToolRegistry:
    """``base`` and the tools of each server of ``commands``, started on ``stack`` (they
    stop when it closes, in the task that entered it)."""
    registry = ToolRegistry(base)
    for command in commands:
        for tool in await stack.enter_async_context(mcp_tools(command, start_timeout=start_timeout)):
            registry.add(tool)
    return registry


class HeldServers:
    """MCP servers started once and held open in a task of their own, for runs in other
    tasks of the same event loop; :meth:`stop` stops them from any task. (The ``mcp``
    client's task groups must be left in the task that entered them, and each run, or a
    chat's turn, is a task of its own.)"""

    def __init__(self, commands: Sequence[str], start_timeout: float) -> None:
        self.commands = tuple(commands)
        self.start_timeout = start_timeout
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def start(self, base: ToolRegistry) -> ToolRegistry:
        """Start every server; ``base`` and their tools. A server that cannot start is the
        :class:`UsageError` of :func:`mcp_tools`, the others then stopped."""
        ready: asyncio.Future[ToolRegistry] = asyncio.get_running_loop().create_future()
        task = self._task = asyncio.create_task(self._hold(base, ready), name="agentfsm-mcp-servers")
        try:
            await asyncio.wait((ready, task), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled (Ctrl-C) while they start: stop those started
            task.cancel()
            await self.stop()
            raise
        if not ready.done():
            self._task = None
            task.result()  # the start's error
        return ready.result()

    async def _hold(self, base: ToolRegistry, ready: asyncio.Future[ToolRegistry]) -> None:
        async with AsyncExitStack() as stack:
            ready.set_result(await with_servers(stack, base, self.commands, self.start_timeout))
            await self._stopping.wait()

    async def stop(self) -> None:
        """Stop the servers (once; a second call does nothing), or the start still going on.
        A server that failed while it was held has said so to each call of its tools, so its
        failure is logged here, not raised."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        if not task.done():
            await asyncio.wait((task,))
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            from loguru import logger

            logger.warning("MCP server stopped after a failure: {}", _reason(exc))
