"""Shared pieces of the dialects' instruction text: the example call and its arguments."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentfsm.core._types import DialectName, JSONObject
from agentfsm.dialects.base import ParsedReply
from agentfsm.core.messages import ToolCall, ToolDefinition, ToolSpec

__all__ = [
    "EXAMPLE_NUMBER",
    "EXAMPLE_PREFIX",
    "ParsesReplies",
    "dumps",
    "example_arguments",
    "example_call",
]

#: the value a number parameter is shown with in example calls
EXAMPLE_NUMBER = 1.5
#: what the contract's few-shot puts before a string parameter's name
EXAMPLE_PREFIX = "example "


def dumps(value: Any) -> str:
    """Compact one-line JSON as the dialects write it (UTF-8 kept, no ASCII escapes)."""
    return json.dumps(value, ensure_ascii=False)


def _example_value(schema: Any, name: str, prefix: str) -> Any:
    if not isinstance(schema, dict):
        return "value"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "string")
    simple: dict[Any, Any] = {"integer": 1, "number": EXAMPLE_NUMBER, "boolean": True}
    if typ in simple:
        return simple[typ]
    if typ == "array":
        return [_example_value(schema.get("items"), name, prefix)]
    if typ == "object":
        return example_arguments(schema, prefix)
    return f"{prefix}{name}"


def example_arguments(parameters: JSONObject, prefix: str = "") -> JSONObject:
    """Plausible arguments for a schema: required parameters only, by type.

    A string argument is shown as ``prefix`` + its parameter name.
    """
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return {}
    required = parameters.get("required")
    names = [n for n in props if isinstance(required, list) and n in required] or list(props)[:1]
    return {n: _example_value(props[n], n, prefix) for n in names}


def example_call(tools: Sequence[ToolSpec]) -> ToolCall:
    """One plausible call of the first tool (a placeholder call when there is none)."""
    if not tools:
        return ToolCall.model_construct(id="call_0", name="tool_name", arguments={"arg": "value"})
    tool = tools[0]
    return ToolCall.model_construct(
        id="call_0", name=tool.name, arguments=example_arguments(tool.parameters)
    )


class ParsesReplies:
    """Gives a dialect ``parse``: :func:`~agentfsm.dialects.parse.parse_reply` with its rules."""

    name: DialectName

    def parse(
        self, text: str, tools: Sequence[ToolDefinition] | None = None, *, strict: bool = False
    ) -> ParsedReply:
        """Parse a reply with this dialect's rules (every format is still recognised)."""
        from agentfsm.dialects.parse import parse_reply  # the parser imports the dialects

        return parse_reply(text, tools, self.name, strict=strict)
