"""The enforcement ladder: prompt, prefill, constrained decoding.

``auto`` picks the strongest mechanism the backend offers for the turn:
``constrained`` when it can constrain decoding to a JSON schema, else ``prefill``
when a call is required and it can prefill the assistant turn, else ``prompt``.
Guards and retries run on top of every level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from agentfsm._types import JSONObject, ToolChoice
from agentfsm.backends.base import Capabilities
from agentfsm.errors import UsageError
from agentfsm.messages import ToolSpec

__all__ = [
    "CONSTRAINED_DIALECT",
    "LEVELS",
    "Level",
    "build_action_schema",
    "call_required",
    "choose_level",
]

Level: TypeAlias = Literal["prompt", "prefill", "constrained"]
LEVELS: tuple[str, ...] = ("auto", "prompt", "prefill", "constrained")

# Client schemas are arbitrary; a grammar compiler chokes on some keywords, so the
# constrained schema keeps the structural ones and drops the rest.
_KEEP = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "additionalProperties",
        "minItems",
        "maxItems",
        "description",
    }
)


def call_required(tool_choice: ToolChoice) -> bool:
    """Whether ``tool_choice`` makes a call mandatory this turn."""
    return tool_choice not in ("auto", "none")


def choose_level(requested: str, capabilities: Capabilities, tool_choice: ToolChoice) -> Level:
    """Resolve ``auto`` (or check an explicit level) against what the backend can do."""
    if requested not in LEVELS:
        raise UsageError(f"enforcement must be one of {', '.join(LEVELS)}, got {requested!r}")
    if tool_choice == "none":
        return "prompt"
    if requested == "auto":
        if capabilities.json_schema:
            return "constrained"
        if capabilities.prefill and call_required(tool_choice):
            return "prefill"
        return "prompt"
    if requested == "constrained" and not capabilities.json_schema:
        raise UsageError("this backend cannot constrain decoding to a JSON schema")
    if requested == "prefill" and not capabilities.prefill:
        raise UsageError("this backend cannot prefill the assistant turn")
    return requested  # type: ignore[return-value]


def _simplify(schema: Any, depth: int = 0) -> Any:
    if depth > 12 or not isinstance(schema, dict):
        return {} if depth > 12 else schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _KEEP:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {k: _simplify(v, depth + 1) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _simplify(value, depth + 1)
        elif key in ("anyOf", "oneOf") and isinstance(value, list):
            out["anyOf"] = [_simplify(v, depth + 1) for v in value]
        elif key == "type" and isinstance(value, str) and value == "float":
            out[key] = "number"
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def build_action_schema(tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> JSONObject:
    """The JSON schema of one reply under constrained decoding.

    ``{"action": X}`` where X is ``anyOf`` over ``{tool: const name, args: that tool's
    schema}``, plus a final-answer branch ``{"final": {"content": string}}`` unless
    ``tool_choice`` requires a call; a named ``tool_choice`` keeps only that tool. The
    shape is the ``json-protocol`` dialect's, so the contract, the projected history
    and the grammar all show the model one format.
    """
    offered = list(tools)
    if call_required(tool_choice) and tool_choice != "required":
        offered = [t for t in tools if t.name == tool_choice]
        if not offered:
            raise UsageError(f"tool_choice names {tool_choice!r}, which is not an offered tool")
    actions: list[JSONObject] = []
    for tool in offered:
        args = _simplify(tool.parameters) or {"type": "object"}
        if "type" not in args:
            args["type"] = "object"
        actions.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool.name}, "args": args},
                "required": ["tool", "args"],
                "additionalProperties": False,
            }
        )
    branches: list[JSONObject] = []
    if actions:
        branches.append(
            {
                "type": "object",
                "properties": {"action": actions[0] if len(actions) == 1 else {"anyOf": actions}},
                "required": ["action"],
                "additionalProperties": False,
            }
        )
    if not call_required(tool_choice):
        branches.append(
            {
                "type": "object",
                "properties": {
                    "final": {
                        "type": "object",
                        "properties": {"content": {"type": "string"}},
                        "required": ["content"],
                        "additionalProperties": False,
                    }
                },
                "required": ["final"],
                "additionalProperties": False,
            }
        )
    if len(branches) == 1:
        return branches[0]
    return {"anyOf": branches}


#: the dialect whose format constrained decoding produces
CONSTRAINED_DIALECT = "json-protocol"
