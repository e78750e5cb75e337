"""The enforcement ladder: prompt, prefill, constrained decoding.

``auto`` picks the strongest mechanism the backend offers for the turn:
``constrained`` when it can constrain decoding to a JSON schema, else ``prefill``
when a call is required and it can prefill the assistant turn, else ``prompt``.
Guards and retries run on top of every level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from agentfsm.core._types import DialectName, EnforcementLevel, JSONObject, Level
from agentfsm.core.choice import ToolChoice
from agentfsm.core.backend import Capabilities
from agentfsm.core.errors import UsageError
from agentfsm.core.messages import ToolSpec
from agentfsm.core._memo import Memo, json_digest, json_weight, tools_key
from agentfsm.prompt.grammar import grammar_schema

__all__ = [
    "COMPACT_MAX_ITEMS",
    "CONSTRAINED_DIALECT",
    "LEVELS",
    "Level",
    "MAX_LISTED_ACTIONS",
    "action_item_schema",
    "build_action_schema",
    "choose_level",
]

LEVELS: tuple[EnforcementLevel, ...] = get_args(EnforcementLevel)
#: the most calls a listed action may hold under a grammar (a weak model, once it
#: repeats, would otherwise repeat until the token limit)
MAX_LISTED_ACTIONS = 4
#: the longest argument list a compact schema allows
COMPACT_MAX_ITEMS = 8

def choose_level(requested: EnforcementLevel | str, capabilities: Capabilities, tool_choice: ToolChoice) -> Level:
    """Resolve ``auto`` (or check an explicit level) against what the backend can do."""
    if requested not in LEVELS:
        raise UsageError(f"enforcement must be one of {', '.join(LEVELS)}, got {requested!r}")
    if tool_choice == ToolChoice.NONE:
        return "prompt"
    if requested == "auto":
        if capabilities.json_schema:
            return "constrained"
        if capabilities.prefill and tool_choice.requires_call:
            return "prefill"
        return "prompt"
    if requested == "constrained" and not capabilities.json_schema:
        raise UsageError("this backend cannot constrain decoding to a JSON schema")
    if requested == "prefill" and not capabilities.prefill:
        raise UsageError("this backend cannot prefill the assistant turn")
    return requested


def action_item_schema(
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice,
    compact: bool = False,
    max_length: int | None = None,
    numbers: tuple[float, ...] | None = None,
) -> JSONObject | None:
    """The schema of one action, ``{tool: const name, args: that tool's schema}``
    (``anyOf`` over the offered tools); ``None`` when no tool is offered.

    A named ``tool_choice`` keeps only that tool. ``compact`` bounds every array of
    the arguments to :data:`COMPACT_MAX_ITEMS` items (the retry after an action was
    cut off: a small model can fill an unbounded list until the token limit).
    ``max_length`` bounds every free string of the arguments (the retry after an action
    cut off in a loop, :func:`agentfsm.engine.plan.plan`); ``numbers`` holds every free
    number to one of them (the retry after a misread number).
    """
    offered = list(tools)
    if tool_choice.name is not None:
        offered = [t for t in tools if t.name == tool_choice.name]
        if not offered:
            raise UsageError(f"tool_choice names {tool_choice.name!r}, which is not an offered tool")
    actions: list[JSONObject] = []
    for tool in offered:
        args = grammar_schema(
            tool.parameters, max_items=COMPACT_MAX_ITEMS if compact else None, max_length=max_length, numbers=numbers
        )
        if args.get("type") != "object" and "anyOf" not in args:
            args = {"type": "object"}  # arguments are an object whatever the schema says
        actions.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool.name}, "args": args},
                "required": ["tool", "args"],
                "additionalProperties": False,
            }
        )
    if not actions:
        return None
    return actions[0] if len(actions) == 1 else {"anyOf": actions}


def build_action_schema(
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice,
    parallel: bool = False,
    compact: bool = False,
    answer_schema: JSONObject | None = None,
    no_slot: bool = False,
    max_length: int | None = None,
    numbers: tuple[float, ...] | None = None,
) -> JSONObject:
    """The JSON schema of one reply under constrained decoding.

    ``{"action": X}`` where X is :func:`action_item_schema`, plus a final-answer branch
    ``{"final": {"content": string}}`` unless ``tool_choice`` requires a call (the
    content held to ``answer_schema``, a client's output schema, where there is one). With
    ``parallel`` the action may also be a list of 2 to :data:`MAX_LISTED_ACTIONS` such
    calls (the json-protocol way to write several calls in one reply). The shape is the
    ``json-protocol`` dialect's, so the contract, the projected history and the
    grammar all show the model one format. ``compact``: see :func:`action_item_schema`.
    ``no_slot``: a free-text answer may not begin with ``<`` or a space (:data:`NO_SLOT`:
    the retry after an answer that was a copied ``<slot>`` of the contract). ``max_length``,
    ``numbers``: see :func:`action_item_schema`.
    """
    answer = None if answer_schema is None else json_digest(answer_schema)
    key = (tools_key(tools), tool_choice, parallel, compact, answer, no_slot, max_length, numbers)
    return _SCHEMAS.get(
        key,
        lambda: _action_schema(tools, tool_choice, parallel, compact, answer_schema, no_slot, max_length, numbers),
        json_weight,
    )


#: a JSON string's text that does not begin with ``<`` or white space (nor is empty):
#: no ``<your answer>`` slot of the contract can be written under it
NO_SLOT = r'^[^<"\\\x00-\x20]([^"\\\x00-\x1f]|\\["\\/bfnrt])*$'


#: action schemas by tool set and settings (shared: not to be mutated)
_SCHEMAS: Memo[JSONObject] = Memo(64, max_bytes=8 << 20)


def _action_schema(
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice,
    parallel: bool,
    compact: bool,
    answer: JSONObject | None,
    no_slot: bool,
    max_length: int | None = None,
    numbers: tuple[float, ...] | None = None,
) -> JSONObject:
    one = action_item_schema(tools, tool_choice, compact, max_length, numbers)
    branches: list[JSONObject] = []
    if one is not None:
        action = one
        if parallel:
            listed = {"type": "array", "items": one, "minItems": 2, "maxItems": MAX_LISTED_ACTIONS}
            action = {"anyOf": [one, listed]}
        branches.append(
            {
                "type": "object",
                "properties": {"action": action},
                "required": ["action"],
                "additionalProperties": False,
            }
        )
    if tool_choice.allows_answer:
        text: JSONObject = {"type": "string", "pattern": NO_SLOT} if no_slot else {"type": "string"}
        branches.append(
            {
                "type": "object",
                "properties": {
                    "final": {
                        "type": "object",
                        "properties": {"content": text if answer is None else grammar_schema(answer)},
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
CONSTRAINED_DIALECT: DialectName = "json-protocol"
