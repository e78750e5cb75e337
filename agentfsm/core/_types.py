"""JSON aliases and shared literals."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, get_args

__all__ = [
    "JSONObject",
    "JSONValue",
    "ToolChoice",
    "ToolChoiceMode",
    "ResultStatus",
    "DialectName",
    "EnforcementLevel",
    "DIALECT_NAMES",
]

JSONValue: TypeAlias = Any
JSONObject: TypeAlias = dict[str, Any]

ToolChoiceMode: TypeAlias = Literal["auto", "none", "required"]
#: ``"auto" | "none" | "required"`` or the name of one tool that must be called.
#: Anthropic's ``any`` is normalised to ``required``.
ToolChoice: TypeAlias = str

ResultStatus: TypeAlias = Literal["ok", "empty", "error", "truncated"]

DialectName: TypeAlias = Literal["json-action", "json-protocol", "command", "smiley"]
#: the dialect names in order; the registry in :mod:`agentfsm.dialects` holds one of each
DIALECT_NAMES: tuple[DialectName, ...] = get_args(DialectName)

EnforcementLevel: TypeAlias = Literal["auto", "prompt", "prefill", "constrained"]
