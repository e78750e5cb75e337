"""The prompt contract: what the model is told about tools, format, turns and tool_choice.

Rendered text is deterministic for the same inputs (snapshotted in tests, hashed in
transcripts), and kept short: it must fit a 135M-parameter model's attention.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from agentfsm.core._types import DialectName, JSONObject
from agentfsm.core.choice import ToolChoice
from agentfsm.core.config import DEFAULTS
from agentfsm.dialects import _render, get_dialect
from agentfsm.dialects.base import Dialect
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolCall, ToolDefinition, ToolSpec
from agentfsm.core._memo import Memo, tools_key
from agentfsm.guards.answer_schema import describe

__all__ = [
    "NO_TOOLS",
    "contract_hash",
    "render_call_template",
    "render_contract",
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
    # names only: a ToolSpec made directly is not checked (ToolSpec.from_any refuses others)
    req = {item for item in required if isinstance(item, str)} if isinstance(required, list) else set()
    lines = []
    for name, schema in props.items():
        flag = "required" if name in req else "optional"
        desc = schema.get("description", "") if isinstance(schema, dict) else ""
        line = f"{name} ({_type_name(schema)}, {flag})"
        if desc:
            line += f": {str(desc)[:_MAX_DESCRIPTION]}"
        lines.append(line)
    return lines


def render_call_template(tool: ToolSpec, dialect: Dialect) -> str:
    """A call of ``tool`` in ``dialect`` with ``<name>`` where each (required) argument's
    value goes: what a correction shows, so the model sees the tool's real name and
    parameters but no value it could copy."""
    key = (tool.name, tuple(_template_names(tool.parameters)), dialect)
    found = _TEMPLATES.get(key)
    if found is None:
        if len(_TEMPLATES) >= _MAX_TEMPLATES:
            _TEMPLATES.clear()
        found = _TEMPLATES[key] = _call_template(*key)
    return found


#: the engine renders a template for every reply it checks: once per tool and dialect is enough
_TEMPLATES: dict[tuple[str, tuple[str, ...], Dialect], str] = {}
_MAX_TEMPLATES = 256


def _call_template(tool: str, names: tuple[str, ...], dialect: Dialect) -> str:
    marks = {name: f"\x00{name}\x00" for name in names}
    text = dialect.render_call(ToolCall(id="call_0", name=tool, arguments=marks))
    for name, mark in marks.items():
        text = text.replace(_render.dumps(mark), f"<{name}>").replace(mark, f"<{name}>")
    return text


def _template_names(parameters: JSONObject) -> list[str]:
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return []
    required = parameters.get("required")
    return [n for n in props if isinstance(required, list) and n in required] or list(props)[:1]


#: the whole contract under ``tool_choice="none"``
NO_TOOLS = "Tools are switched off for this turn: answer the user in plain prose."


def _choice_rule(tool_choice: ToolChoice, names: Sequence[str]) -> str:
    if tool_choice.mode == "required":
        return "You MUST call at least one tool in this turn."
    if tool_choice.mode == "auto":
        return "Call a tool when it helps answer; otherwise answer directly in prose."
    if tool_choice.name not in names:
        raise UsageError(f"tool_choice names {tool_choice.name!r}, which is not an offered tool")
    return f"You MUST call the tool `{tool_choice.name}` in this turn."


def _few_shot(dialect: Dialect) -> str:
    # A made-up tool with a value no user asks about: it shows the whole exchange (the
    # value is taken from the request; the result comes back; then the answer) with
    # nothing a small model could paste into a real call or a real answer.
    call = _render.FORMAT_EXAMPLE
    return (
        f"Example of the format, with a made-up tool ({call.name} is not one of your tools):\n"
        f"User: {_render.FORMAT_EXAMPLE_REQUEST}\n"
        f"Assistant:\n{dialect.render_call(call)}\n"
        f"User: Result of {call.name}: ...\n"
        "Assistant: (an answer to the user that states the result, "
        f"written as {dialect.answer_format})"
    )


def _answer_rule(answer_schema: str | None) -> str:
    """The rule for the answer's own JSON, under a client's output schema."""
    if answer_schema is None:
        return ""
    return (
        "Your answer to the user (a reply with no tool call) must be only one JSON value matching "
        f"this JSON Schema, with no other text: {answer_schema}"
    )


def _constrained_contract(
    specs: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool, answer_schema: str | None
) -> str:
    # Under a grammar the format is fixed by decoding itself: the contract only names
    # the two shapes and the rules, and shows no values at all.
    lines = ["Reply with one JSON object."]
    lines.append('To call a tool: {"action": {"tool": <tool name>, "args": {<its parameters>}}}')
    if tool_choice.allows_answer:
        if answer_schema is None:
            lines.append('To answer the user: {"final": {"content": <your answer>}}')
        else:
            lines.append('To answer the user: {"final": {"content": <your answer, one JSON value>}}')
            lines.append(f"Your answer's JSON must match this JSON Schema: {answer_schema}")
    lines += [
        "",
        "Rules:",
        "1. Take every argument value from the user's message or from a tool result.",
        "2. A tool's result comes back in the next message. Then call another tool or answer.",
        "3. When you have what you need, answer the user, stating the results.",
        "4. You may call several tools at once." if parallel else "4. Call one tool per reply.",
        f"5. {_choice_rule(tool_choice, [t.name for t in specs])}",
    ]
    return "\n".join(lines)


def render_contract(
    tools: Sequence[ToolDefinition],
    dialect: DialectName = DEFAULTS.dialect,
    tool_choice: ToolChoice | str = ToolChoice.AUTO,
    parallel: bool = DEFAULTS.parallel,
    *,
    constrained: bool = False,
    answer_schema: JSONObject | None = None,
) -> str:
    """Render the system prompt that teaches the model to call ``tools``.

    ``constrained``: decoding is held to the action grammar (json-protocol shape), so
    the contract names the shapes and rules only, with no example. Under
    ``tool_choice="none"`` it is :data:`NO_TOOLS`: no tool, no action format.
    ``answer_schema`` (a client's output schema) is quoted: the final answer must be one
    JSON value that matches it.

    ``tools``: ToolSpecs, OpenAI or Anthropic tool dicts (or callables); anything else
    is a :class:`~agentfsm.core.errors.ToolSpecError`. ``tool_choice``: the value, or its
    spelling (``auto``, ``none``, ``required``, a tool's name).
    """
    choice = ToolChoice.parse(tool_choice)
    specs = [ToolSpec.from_any(t) for t in tools]
    names = [t.name for t in specs]
    if len(set(names)) != len(names):
        raise UsageError("tool names must be unique")
    schema = None if answer_schema is None else describe(answer_schema)
    if choice.mode == "none":
        # tools are off: nothing to call, so no tool is listed and no action format is
        # taught (a model shown them writes actions anyway)
        return NO_TOOLS if schema is None else f"{NO_TOOLS}\n{_answer_rule(schema)}"
    if not specs:
        if choice.requires_call:
            raise UsageError(f"tool_choice={str(choice)!r} but no tools are offered")
        return "Answer the user in plain prose."
    key = (tools_key(specs), dialect, choice, parallel, constrained, schema)
    return _CONTRACTS.get(key, lambda: _compose(specs, dialect, choice, parallel, constrained, schema))


#: contracts by tool set and settings (the same for every request that offers them)
_CONTRACTS: Memo[str] = Memo(64, max_bytes=8 << 20)


def _compose(specs: list[ToolSpec], dialect: DialectName, tool_choice: ToolChoice, parallel: bool,
            constrained: bool, answer_schema: str | None) -> str:
    d = get_dialect(dialect)
    names = [t.name for t in specs]
    parts = ["You can call tools. Available tools:"]
    for tool in specs:
        desc = tool.description.strip().splitlines()[0][:_MAX_DESCRIPTION] if tool.description.strip() else ""
        parts.append(f"- {tool.name}: {desc}" if desc else f"- {tool.name}")
        parts.extend(f"    {line}" for line in summarize_schema(tool.parameters))
    parts.append("")
    if constrained:
        parts.append(_constrained_contract(specs, tool_choice, parallel, answer_schema))
        return "\n".join(parts)
    parts.append(d.render_instructions(specs, tool_choice, parallel))
    parts.append(f"({_render.FORMAT_EXAMPLE.name} above is a made-up example: call only the tools listed.)")
    parts.append("")
    parts.append("Rules:")
    parts.append("1. To use a tool, write the action and stop. Do not guess the result.")
    parts.append("2. Take every argument value from the user's message or from a tool result.")
    parts.append("3. The tool result comes back in the next message. Then call another tool or answer.")
    parts.append(f"4. When you have what you need, answer the user, stating the results, written as {d.answer_format}.")
    parts.append("5. Only use the tools listed above, with the parameters listed.")
    parts.append(
        "6. You may write several actions in one reply."
        if parallel
        else "6. Write at most one action per reply."
    )
    parts.append(f"7. {_choice_rule(tool_choice, names)}")
    if answer_schema is not None:
        parts.append(f"8. {_answer_rule(answer_schema)}")
    parts.append("")
    parts.append(_few_shot(d))
    return "\n".join(parts)


def contract_hash(text: str) -> str:
    """sha256 of a rendered contract, for transcripts."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
