"""The normalized conversation: messages, tool specs, tool calls and tool results.

All values are frozen pydantic models. Wire formats (OpenAI, Anthropic) are turned
into these by :mod:`agentfsm.protocols`; everything in the core works on these.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from agentfsm.core._types import JSONObject, ResultStatus
from agentfsm.core.errors import ToolSpecError

__all__ = [
    "AssistantMessage",
    "Message",
    "PromptMessage",
    "SystemMessage",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "ToolResult",
    "ToolSpec",
    "UserMessage",
    "parse_messages",
    "round_start",
    "tool_type_hints",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ToolCall(BaseModel):
    """One call of a tool: an id, the tool's name and its arguments."""

    model_config = _FROZEN

    id: str
    name: str
    arguments: JSONObject = Field(default_factory=dict)


class ToolResult(BaseModel):
    """What a tool returned for one call."""

    model_config = _FROZEN

    call_id: str
    content: str
    status: ResultStatus = "ok"
    name: str | None = None


class SystemMessage(BaseModel):
    """A system prompt."""

    model_config = _FROZEN
    role: Literal["system"] = "system"
    content: str


class UserMessage(BaseModel):
    """A user turn. ``correction`` is set when the runtime wrote it to re-ask the model."""

    model_config = _FROZEN
    role: Literal["user"] = "user"
    content: str
    correction: str | None = None


class AssistantMessage(BaseModel):
    """A model turn: prose (or None) and the tool calls parsed from it."""

    model_config = _FROZEN
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class ToolMessage(BaseModel):
    """The result of one tool call, as it sits in the history."""

    model_config = _FROZEN
    role: Literal["tool"] = "tool"
    result: ToolResult

    @property
    def call_id(self) -> str:
        return self.result.call_id


Message: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def parse_messages(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Validate a list of dicts in our own normalized shape into messages."""
    return _MESSAGES.validate_python(list(data))


def round_start(history: Sequence[Message]) -> int:
    """Where the current round of ``history`` begins: just after its latest tool result
    or user request (a correction is neither); 0 where it has neither. The message
    before that index, if any, says which of the two started the round."""
    for index in range(len(history) - 1, -1, -1):
        msg = history[index]
        if isinstance(msg, ToolMessage) or (isinstance(msg, UserMessage) and msg.correction is None):
            return index + 1
    return 0


class PromptMessage(BaseModel):
    """A plain chat message as sent to a text-only backend (no tool fields)."""

    model_config = _FROZEN
    role: Literal["system", "user", "assistant"]
    content: str


class ToolSpec(BaseModel):
    """A tool the model may call: its name, description and JSON-Schema parameters."""

    model_config = _FROZEN

    name: str
    description: str = ""
    parameters: JSONObject = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ToolSpec:
        """From ``{"type": "function", "function": {"name", "description", "parameters"}}``."""
        fn = data.get("function") if data.get("type", "function") == "function" else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise ToolSpecError(f"not an OpenAI function tool: {_excerpt(data)}")
        return cls._build(fn["name"], fn.get("description"), fn.get("parameters"))

    @classmethod
    def from_anthropic(cls, data: Mapping[str, Any]) -> ToolSpec:
        """From ``{"name", "description", "input_schema"}``."""
        if not isinstance(data.get("name"), str):
            raise ToolSpecError(f"not an Anthropic tool: {_excerpt(data)}")
        return cls._build(data["name"], data.get("description"), data.get("input_schema"))

    @classmethod
    def from_callable(cls, fn: Callable[..., Any], *, name: str | None = None) -> ToolSpec:
        """From a Python function: the schema comes from its type hints, via pydantic.

        ``fn`` may be a function, a method, a ``functools.partial`` or an object with
        ``__call__`` (the last two need ``name``). The name must be one every dialect can
        write: ASCII letters, digits, ``_``, ``.`` and ``-``, starting with a letter or
        ``_``, at most 128 characters (a :class:`ToolSpecError` otherwise)."""
        if name is not None and not isinstance(name, str):
            raise ToolSpecError(f"a tool name must be a string, got {type(name).__name__}")
        tool_name = name if name is not None else getattr(fn, "__name__", None)
        if not tool_name or tool_name == "<lambda>":
            raise ToolSpecError(f"a callable tool needs a name (pass name=...): {_excerpt(fn)}")
        if not _CALLABLE_NAME.fullmatch(tool_name):
            # the command dialect's grammar (``@tool NAME {...}``) reads no other name: a
            # tool named otherwise could never be called there, only corrected until the budget ran out
            raise ToolSpecError(
                f"tool name {tool_name!r} cannot be written in every dialect: use ASCII letters, digits, "
                "'_', '.' and '-', starting with a letter or '_', at most 128 characters (pass name=...)"
            )
        documented: Any = fn
        while isinstance(documented, functools.partial):  # its own docstring is partial's
            documented = documented.func
        return cls(
            name=tool_name,
            description=inspect.getdoc(documented) or "",
            parameters=_signature_schema(fn),
        )

    @classmethod
    def from_any(cls, tool: ToolSpec | Mapping[str, Any] | Callable[..., Any]) -> ToolSpec:
        """Accept a ToolSpec, an OpenAI or Anthropic tool dict, or a callable."""
        if isinstance(tool, ToolSpec):
            return tool
        if isinstance(tool, Mapping):
            if "function" in tool:
                return cls.from_openai(tool)
            if "input_schema" in tool:
                return cls.from_anthropic(tool)
            if isinstance(tool.get("name"), str):
                return cls._build(tool["name"], tool.get("description"), tool.get("parameters"))
            raise ToolSpecError(f"unrecognised tool definition: {_excerpt(tool)}")
        if callable(tool):
            return cls.from_callable(tool)
        raise ToolSpecError(f"unrecognised tool definition of type {type(tool).__name__}")

    @classmethod
    def _build(cls, name: str, description: Any, parameters: Any) -> ToolSpec:
        if not name.strip():
            raise ToolSpecError("tool name must not be empty")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(parameters, Mapping):
            raise ToolSpecError(f"tool {name!r}: parameters must be a JSON-Schema object")
        kind = parameters.get("type", "object")
        if kind != "object" and not (isinstance(kind, list) and "object" in kind):
            # a call's arguments are an object: no reply could satisfy another type, and
            # the turn would spend its corrections finding that out (both providers refuse it)
            raise ToolSpecError(f"tool {name!r}: parameters must describe an object (type 'object'), not {kind!r}")
        required = parameters.get("required")
        if required is not None and not (
            isinstance(required, list) and all(isinstance(item, str) for item in required)
        ):
            # the names of required properties; anything else cannot be checked or described
            raise ToolSpecError(f"tool {name!r}: parameters.required must be an array of property names (strings)")
        return cls(name=name, description=str(description or ""), parameters=dict(parameters))


#: what a tool may be given as: a ToolSpec, an OpenAI (``{"type": "function", "function":
#: {...}}``) or Anthropic (``{"name", "description", "input_schema"}``) tool dict, or a
#: callable; :meth:`ToolSpec.from_any` turns each into a ToolSpec
ToolDefinition: TypeAlias = ToolSpec | Mapping[str, Any] | Callable[..., Any]


#: a tool name every dialect can write (the command dialect's ``@tool NAME`` reads these only)
_CALLABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")


def tool_type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The type hints of a tool's parameters: of the function a ``functools.partial``
    wraps, of a callable object's ``__call__``, of a class's ``__init__``.
    Unreadable hints (a name that does not resolve) raise ``NameError``."""
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.isclass(target):
        target = target.__init__
    elif not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isbuiltin(target)):
        call = getattr(type(target), "__call__", None)  # an object with __call__
        target = call if call is not None else target
    try:
        return get_type_hints(target)
    except TypeError:  # a builtin or an extension type: it declares none
        return {}


def _signature_schema(fn: Callable[..., Any]) -> JSONObject:
    try:
        sig = inspect.signature(fn)
        hints = tool_type_hints(fn)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolSpecError(f"cannot read the signature of {fn!r}: {exc}") from exc
    fields: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if pname == "idempotency_key":
            continue  # filled in by the tool registry (runtime.tools), never by the model
        annotation = hints.get(pname, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, default)
    try:
        model = create_model(f"{getattr(fn, '__name__', 'tool')}_args", **fields)
        schema = model.model_json_schema()
    except Exception as exc:  # pydantic raises several error types for odd annotations
        raise ToolSpecError(f"cannot build a JSON schema for {fn!r}: {_culprit(fields) or exc}") from exc
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


def _culprit(fields: Mapping[str, tuple[Any, Any]]) -> str | None:
    """Which parameter's annotation has no JSON schema, in words (None when each has one)."""
    for pname, (annotation, _default) in fields.items():
        try:
            TypeAdapter(annotation).json_schema()
        except Exception:  # the one pydantic cannot describe
            shown = getattr(annotation, "__name__", None) or repr(annotation)
            return (f"parameter {pname!r} is annotated {shown}, which has no JSON schema "
                    "(annotate it with a JSON type, a pydantic model, a dataclass or an enum)")
    return None


def _excerpt(data: Any) -> str:
    text = repr(data)
    return text if len(text) <= 200 else text[:200] + "..."
