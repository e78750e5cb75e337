"""A retry's tools with their parameters held to the values the request left for them.

After some corrections the runtime knows which values a call should take (the numbers
of one part of the request, the names no call has used); under constrained decoding
the retry's grammar then offers only those, so a small model that keeps writing the
value it wrote before can write the one it was told.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations
from typing import Any

from agentfsm.core.messages import ToolSpec

__all__ = ["hold", "number_params", "numbers_for"]

_NUMBERS = ("number", "integer")


def _free(schema: Any, kinds: tuple[str, ...]) -> bool:
    return isinstance(schema, dict) and schema.get("type") in kinds and "enum" not in schema and "const" not in schema


def number_params(tool: ToolSpec) -> int:
    """How many top-level number parameters ``tool`` has."""
    props = tool.parameters.get("properties")
    return sum(1 for s in props.values() if _free(s, _NUMBERS)) if isinstance(props, dict) else 0


def numbers_for(tool: ToolSpec, given: set[float], results: set[float]) -> set[float]:
    """The numbers ``tool``'s parameters are held to: ``given`` (a part of the request)
    when it holds one for each parameter ("add 10 and 5"), else with the results'
    numbers too ("then add 5 to it")."""
    return given if len(given) >= number_params(tool) else given | results


def hold(tool: ToolSpec, numbers: set[float], names: Sequence[str] = ()) -> ToolSpec:
    """``tool`` with its top-level number parameters taking one of ``numbers`` and its
    string parameters one of ``names`` (each left free when given nothing).

    With exactly as many numbers as number parameters (up to 3), each number is used
    once, in any order ("add 10 and 5" is ``add(10, 5)`` or ``add(5, 10)``)."""
    props = tool.parameters.get("properties")
    if not isinstance(props, dict):
        return tool
    parameters: dict[str, Any] = dict(tool.parameters)
    numeric = [n for n, s in props.items() if _free(s, _NUMBERS)] if numbers else []
    values = [int(v) if v.is_integer() else v for v in sorted(numbers)]
    spread = bool(numeric) and len(values) == len(numeric) <= 3
    held: dict[str, Any] = {}
    for name, schema in props.items():
        if name in numeric and not spread:
            schema = {**schema, "enum": values}
        elif names and _free(schema, ("string",)):
            schema = {**schema, "enum": list(dict.fromkeys(names))}
        held[name] = schema
    parameters["properties"] = held
    if spread:
        parameters["anyOf"] = [{"properties": {n: {"const": v} for n, v in zip(numeric, order, strict=True)}}
                               for order in permutations(values)]
    return tool.model_copy(update={"parameters": parameters})
