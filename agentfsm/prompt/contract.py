"""The prompt contract: what the model is told about tools, format, turns and tool_choice.

Rendered text is deterministic for the same inputs (snapshotted in tests, hashed in
transcripts), and kept short: it must fit a 135M-parameter model's attention.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from agentfsm.core._types import DialectName, JSONObject, ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.dialects import _render, get_dialect
from agentfsm.dialects.base import Dialect
from agentfsm.prompt.enforcement import call_required
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall, ToolDefinition, ToolSpec

__all__ = [
    "contract_hash",
    "example_arguments",
    "render_contract",
    "render_example_call",
    "summarize_schema",
]

_MAX_DESCRIPTION = 300


def _type_name(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:12])
    typ = schema.get("type")
    if isinstance(typ, list):
        return " | ".join(str(t) for t in typ)
    if typ == "array":
        return f"array of {_type_name(schema.get('items'))}"
    if isinstance(typ, str):
        return typ
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type_name(s) for s in schema[key][:6])
    return "any"


def summarize_schema(parameters: JSONObject) -> list[str]:
    """One line per parameter: ``name (type, required): description``."""
    props = parameters.get("properties")
    if not isinstance(props, dict) or not props:
        return []
    required = parameters.get("required")
    req = set(required) if isinstance(required, list) else set()
    lines = []
    for name, schema in props.items():
        flag = "required" if name in req else "optional"
        desc = schema.get("description", "") if isinstance(schema, dict) else ""
        line = f"{name} ({_type_name(schema)}, {flag})"
        if desc:
            line += f": {str(desc)[:_MAX_DESCRIPTION]}"
        lines.append(line)
    return lines


def example_arguments(parameters: JSONObject) -> JSONObject:
    """Plausible arguments for a schema (required parameters only); strings read ``example NAME``."""
    return _render.example_arguments(parameters, prefix=_render.EXAMPLE_PREFIX)


def render_example_call(tool: ToolSpec, dialect: Dialect) -> str:
    """The action text of an example call of ``tool`` in ``dialect``."""
    call = ToolCall(id="call_0", name=tool.name, arguments=example_arguments(tool.parameters))
    return dialect.render_call(call)


def _choice_rule(tool_choice: ToolChoice, names: Sequence[str]) -> str:
    if tool_choice == "none":
        return "Tools are switched off for this turn: answer in plain prose and call no tool."
    if tool_choice == "required":
        return "You MUST call at least one tool in this turn."
    if tool_choice == "auto":
        return "Call a tool when it helps answer; otherwise answer directly in prose."
    if tool_choice not in names:
        raise UsageError(f"tool_choice names {tool_choice!r}, which is not an offered tool")
    return f"You MUST call the tool `{tool_choice}` in this turn."


def _few_shot(tools: Sequence[ToolSpec], dialect: Dialect) -> str:
    # Small models copy the example: the example request states the very values the
    # example call uses, which teaches "take the arguments from the user's message".
    tool = tools[0]
    args = example_arguments(tool.parameters)
    call = ToolCall(id="call_0", name=tool.name, arguments=args)
    given = ", ".join(f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    request = f"Please use {tool.name} with {given}." if given else f"Please use {tool.name}."
    return (
        "Example of one full exchange:\n"
        f"User: {request}\n"
        f"Assistant:\n{dialect.render_call(call)}\n"
        f"User: Result of {tool.name} (call_0): 42. "
        "Call another tool if needed, or give the final answer.\n"
        f"Assistant:\n{dialect.render_final('The result is 42.')}"
    )


def render_contract(
    tools: Sequence[ToolDefinition],
    dialect: DialectName = DEFAULTS.dialect,
    tool_choice: ToolChoice = "auto",
    parallel: bool = DEFAULTS.parallel,
) -> str:
    """Render the system prompt that teaches the model to call ``tools``.

    ``tools``: ToolSpecs, OpenAI or Anthropic tool dicts (or callables); anything else
    is a :class:`~agentfsm.core.errors.ToolSpecError`.
    """
    d = get_dialect(dialect)
    specs = [ToolSpec.from_any(t) for t in tools]
    names = [t.name for t in specs]
    if len(set(names)) != len(names):
        raise UsageError("tool names must be unique")
    if not specs:
        if call_required(tool_choice):
            raise UsageError(f"tool_choice={tool_choice!r} but no tools are offered")
        return "Answer the user in plain prose."
    parts = ["You can call tools. Available tools:"]
    for tool in specs:
        desc = tool.description.strip().splitlines()[0][:_MAX_DESCRIPTION] if tool.description.strip() else ""
        parts.append(f"- {tool.name}: {desc}" if desc else f"- {tool.name}")
        parts.extend(f"    {line}" for line in summarize_schema(tool.parameters))
    parts.append("")
    parts.append(d.render_instructions(specs, tool_choice, parallel))
    parts.append("")
    parts.append("Rules:")
    parts.append("1. To use a tool, write the action and stop. Do not guess the result.")
    parts.append("2. The tool result comes back in the next message. Then call another tool or answer.")
    parts.append("3. When you have what you need, answer the user in plain prose with no action.")
    parts.append("4. Only use the tools listed above, with the parameters listed.")
    parts.append(
        "5. You may write several actions in one reply."
        if parallel
        else "5. Write at most one action per reply."
    )
    parts.append(f"6. {_choice_rule(tool_choice, names)}")
    if tool_choice != "none":
        parts.append("")
        parts.append(_few_shot(specs, d))
    return "\n".join(parts)


def contract_hash(text: str) -> str:
    """sha256 of a rendered contract, for transcripts."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
