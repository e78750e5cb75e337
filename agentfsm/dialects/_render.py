"""Shared pieces of the dialects' instruction text: the example call and its arguments."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentfsm.core._types import JSONObject
from agentfsm.core.messages import ToolCall, ToolSpec

__all__ = [
    "EXAMPLE_NUMBER",
    "EXAMPLE_PREFIX",
    "dumps",
    "FORMAT_EXAMPLE",
    "FORMAT_EXAMPLE_REQUEST",
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


#: the call every format example shows: a made-up tool that is never offered, with a
#: value no request of a user's is about, so a small model has nothing to copy into a
#: real call (an example of an offered tool taught it to paste the example's values)
FORMAT_EXAMPLE = ToolCall.model_construct(id="call_0", name="count_letters", arguments={"word": "xylophone"})
#: the user request the contract's example exchange answers with :data:`FORMAT_EXAMPLE`
FORMAT_EXAMPLE_REQUEST = 'How many letters does the word "xylophone" have?'


def example_call(tools: Sequence[ToolSpec] = ()) -> ToolCall:
    """The call a format example shows: :data:`FORMAT_EXAMPLE` (``tools`` are not used:
    an offered tool's example values get copied)."""
    return FORMAT_EXAMPLE


