"""The tool registry: Python callables (sync or async) and MCP tools behind one interface.

A tool's exception becomes an ``error`` result, never a crash of the agent loop.

Idempotency: a tool may run more than once for the same call (a batch killed while a
task was in flight runs that task again: at-least-once execution). Inside an
:func:`idempotency_scope` (batch tasks run in one named by their task id) every call
gets the key ``"<scope>/<call id>"``. Call ids are minted from the conversation's
position (``call_0``, ``call_1``, ...), so the re-run of the same step gets the same
key. A Python tool that declares a keyword parameter named ``idempotency_key`` receives
it (the parameter is left out of the tool's schema: the model never sees nor sets it);
any other executor reads :func:`current_idempotency_key`. Outside a scope the key is None.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from agentfsm.core.errors import ToolExecutionError, ToolSpecError, UsageError
from agentfsm.core.messages import ToolCall, ToolResult, ToolSpec, tool_type_hints
from agentfsm.runtime._tool_thread import in_daemon_thread

__all__ = [
    "IDEMPOTENCY_KEY_PARAM",
    "RegisteredTool",
    "ToolRegistry",
    "callable_executor",
    "current_idempotency_key",
    "idempotency_scope",
    "import_tools_module",
    "load_tools",
    "result_from_value",
]

Executor = Callable[[dict[str, Any]], Awaitable[Any]]

#: the keyword a tool declares to receive its call's idempotency key
IDEMPOTENCY_KEY_PARAM = "idempotency_key"

_scope: ContextVar[str | None] = ContextVar("agentfsm_idempotency_scope", default=None)
_call_key: ContextVar[str | None] = ContextVar("agentfsm_idempotency_key", default=None)


@contextmanager
def idempotency_scope(name: str) -> Iterator[None]:
    """Give every tool call run inside this block the key ``"<name>/<call id>"``."""
    token = _scope.set(name)
    try:
        yield
    finally:
        _scope.reset(token)


def current_idempotency_key() -> str | None:
    """The key of the tool call being executed (None outside an :func:`idempotency_scope`)."""
    return _call_key.get()


@dataclass(frozen=True)
class RegisteredTool:
    """A tool spec and the coroutine function that runs it."""

    spec: ToolSpec
    execute: Executor


#: the types of plain JSON values (what a tool's arguments arrive as)
_JSON_TYPES = (str, int, float, bool, type(None))


def _jsonable(value: Any) -> Any:
    """A value ``json`` cannot write, as pydantic writes it in JSON (a datetime as ISO text,
    a dataclass or model as an object, a set as an array, an enum as its value); its
    ``str`` when pydantic cannot either."""
    try:
        return to_jsonable_python(value)
    except Exception:  # pydantic raises several error types for what it cannot write
        return str(value)


def result_from_value(call: ToolCall, value: Any) -> ToolResult:
    """Turn what a tool returned into a ToolResult (``empty`` for None / blank).

    A string is the content as it is; other values are written as JSON, those ``json``
    cannot write as pydantic writes them (a value that becomes a string, such as a
    datetime, reads as that string, unquoted, like a returned string)."""
    if value is None or (isinstance(value, str | list | dict | tuple) and len(value) == 0):
        return ToolResult(call_id=call.id, name=call.name, content="", status="empty")
    if not isinstance(value, _JSON_TYPES + (list, dict, tuple)):
        value = _jsonable(value)
    if isinstance(value, str):
        content = value
    else:
        try:
            content = json.dumps(value, ensure_ascii=False, default=_jsonable)
        except (TypeError, ValueError):
            content = str(value)
    if not content.strip():
        return ToolResult(call_id=call.id, name=call.name, content="", status="empty")
    return ToolResult(call_id=call.id, name=call.name, content=content)


def _takes_key(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    param = params.get(IDEMPOTENCY_KEY_PARAM)
    return param is not None and param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD)


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of JSON values only (dicts, lists and leaves)."""
    if isinstance(value, _JSON_TYPES):
        return True
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    return False


class _ArgumentTypes:
    """Turns a call's JSON arguments into the types the function declares, where those
    are not JSON's own: an enum member, a pydantic model, a dataclass, a datetime.

    An argument whose declared type is JSON's (``int``, ``str``, ``list[float]`` ...) is
    passed as the model wrote it; so is one that does not validate (the schema guard has
    checked it against the same schema already). Adapters are built on first use."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._adapters: dict[str, TypeAdapter[Any]] | None = None

    def _built(self) -> dict[str, TypeAdapter[Any]]:
        if self._adapters is None:
            adapters: dict[str, TypeAdapter[Any]] = {}
            try:
                hints = tool_type_hints(self._fn)
            except (NameError, TypeError, ValueError):
                hints = {}
            for pname, hint in hints.items():
                if pname == "return" or pname == IDEMPOTENCY_KEY_PARAM or hint in (Any, str, int, float, bool):
                    continue
                try:
                    adapters[pname] = TypeAdapter(hint)
                except Exception:  # an annotation pydantic cannot read: passed as written
                    continue
            self._adapters = adapters
        return self._adapters

    def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        adapters = self._built()
        if not adapters:
            return args
        out = dict(args)
        for pname, value in args.items():
            adapter = adapters.get(pname)
            if adapter is None:
                continue
            try:
                typed = adapter.validate_python(value)
            except ValidationError:
                continue
            if not _plain_json(typed):
                out[pname] = typed
        return out


def callable_executor(fn: Callable[..., Any]) -> Executor:
    """An executor for a Python function, sync (run in a thread) or async.

    The arguments arrive as JSON; one whose parameter is declared with a type JSON does
    not have (an enum, a pydantic model, a dataclass, a datetime) is passed as that type.
    A function with an ``idempotency_key`` parameter gets the current call's key there
    (whatever the model put in the arguments under that name is replaced).
    """
    takes_key = _takes_key(fn)
    typed = _ArgumentTypes(fn)
    positional = _positional_only(fn)

    async def run(args: dict[str, Any]) -> Any:
        args = typed(args)
        if takes_key:
            args = {**args, IDEMPOTENCY_KEY_PARAM: current_idempotency_key()}
        leading: list[Any] = []
        if positional:
            leading, args = _split_positional(positional, args)
        if inspect.iscoroutinefunction(fn):
            return await fn(*leading, **args)
        value = await in_daemon_thread(fn, *leading, **args)  # Ctrl-C does not wait for it
        if inspect.isawaitable(value):
            return await value
        return value

    return run


def _positional_only(fn: Callable[..., Any]) -> tuple[inspect.Parameter, ...]:
    """The parameters that cannot be passed by name (``def f(x, /)``, ``math.sqrt``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p for p in params if p.kind is p.POSITIONAL_ONLY)


def _split_positional(
    positional: tuple[inspect.Parameter, ...], args: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of positional-only parameters, in order (a default fills a gap before
    one that was given), and the rest by name. The model names every argument."""
    given = [i for i, p in enumerate(positional) if p.name in args]
    if not given:
        return [], args
    rest = dict(args)
    leading: list[Any] = []
    for param in positional[: given[-1] + 1]:
        if param.name in rest:
            leading.append(rest.pop(param.name))
        elif param.default is not param.empty:
            leading.append(param.default)
        else:
            break  # a required one is missing: the call fails naming it
    return leading, rest


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
            reg = RegisteredTool(ToolSpec.from_callable(tool, name=name), callable_executor(tool))
        elif isinstance(tool, ToolSpec | Mapping):
            raise ToolSpecError(
                "a registry tool must be a callable or a RegisteredTool; a bare ToolSpec or "
                "tool dict has nothing to run (pass it to the engine or proxy instead)"
            )
        else:
            raise ToolSpecError(
                f"{_kind(tool)} is not a tool: a registry tool is a callable or a RegisteredTool"
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
        scope = _scope.get()
        token = _call_key.set(f"{scope}/{call.id}" if scope is not None else None)
        try:
            value = await tool.execute(dict(call.arguments))
        except Exception as exc:  # a tool's failure is a result the model should see
            return ToolResult(
                call_id=call.id,
                name=call.name,
                content=f"{type(exc).__name__}: {exc}",
                status="error",
            )
        finally:
            _call_key.reset(token)
        return result_from_value(call, value)

    def execute(self, call: ToolCall) -> ToolResult:
        """Synchronous :meth:`aexecute`; inside a running event loop (a notebook, an async
        handler) a :class:`~agentfsm.core.errors.UsageError`: await :meth:`aexecute` there."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aexecute(call))
        raise UsageError("ToolRegistry.execute() was called inside a running event loop; await aexecute() instead")


def _on_import_path(directory: Path) -> bool:
    return any(isinstance(entry, str) and Path(entry or ".").resolve() == directory for entry in sys.path)


def _not_found_hint(module_name: str, exc: ModuleNotFoundError) -> str:
    """Why a tools module of the user's own is not found: the console script ``agentfsm``
    does not put the current directory on the import path (``python -m`` does)."""
    top = module_name.split(".")[0]
    if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
        return ""  # the module was found; something it imports was not
    here = Path.cwd().resolve()
    if (here / f"{top}.py").is_file() or (here / top).is_dir():
        if not _on_import_path(here):
            return f" ({top} is in the current directory, which is not on the import path: run with PYTHONPATH=.)"
        return ""
    return " (not on the import path; for a module of your own, set PYTHONPATH to its directory)"


def import_tools_module(module_name: str) -> ModuleType:
    """Import a tools module; whatever stops it (not found, a syntax error, an exception
    at import) is a :class:`UsageError` naming the module and the error."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        hint = _not_found_hint(module_name, exc)
        raise UsageError(f"cannot import tools module {module_name!r}: {exc}{hint}") from exc
    except Exception as exc:  # a SyntaxError, or the module's own code raised
        raise UsageError(f"cannot import tools module {module_name!r}: {type(exc).__name__}: {exc}") from exc


def load_tools(ref: str) -> list[Any]:
    """Load tools from ``"package.module:ATTR"`` (a list of callables, or one callable)."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise UsageError(f"tools reference must look like 'package.module:ATTR', got {ref!r}")
    path = Path(module_name)
    if "/" in module_name or os.sep in module_name or (path.suffix == ".py" and path.is_file()):
        # importlib would say "relative import needs 'package'" or "'x' is not a package"
        raise UsageError(f"tools reference {ref!r} names a file; name its module instead: "
                         f"'{path.stem}:{attr}', with {str(path.parent)!r} on the import path (PYTHONPATH)")
    module = import_tools_module(module_name)
    try:
        value = getattr(module, attr)
    except AttributeError as exc:
        raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from exc
    if callable(value) and not isinstance(value, Sequence | ToolRegistry):
        return [value]
    if isinstance(value, ToolRegistry):
        return list(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = list(value)
        for index, item in enumerate(items):
            if isinstance(item, ToolSpec | Mapping):
                raise UsageError(f"{ref!r}[{index}] is a tool definition with nothing to run: "
                                 "list the functions (or RegisteredTools) instead")
            if not isinstance(item, RegisteredTool) and not callable(item):
                raise UsageError(f"{ref!r}[{index}] is {_kind(item)}, not a tool: list functions (or RegisteredTools)")
        return items
    raise UsageError(f"{ref!r} is {_kind(value)}, neither a callable nor a list of tools")


def _kind(value: Any) -> str:
    """``value`` as a user would name it in a message: its type and a short repr."""
    text = repr(value)
    return f"{text[:57] + '...' if len(text) > 60 else text} ({type(value).__name__})"
