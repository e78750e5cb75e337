"""JSON aliases and shared literals (``tool_choice`` is a value: :mod:`agentfsm.core.choice`)."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, get_args

__all__ = [
    "JSONObject",
    "JSONValue",
    "ResultStatus",
    "DialectName",
    "EnforcementLevel",
    "Level",
    "DIALECT_NAMES",
    "POLICY_NAMES",
    "DEFAULT_POLICIES",
    "PolicyName",
]

JSONValue: TypeAlias = Any
JSONObject: TypeAlias = dict[str, Any]

ResultStatus: TypeAlias = Literal["ok", "empty", "error", "truncated"]

DialectName: TypeAlias = Literal["json-action", "json-protocol", "command", "smiley"]
#: the dialect names in order; the registry in :mod:`agentfsm.dialects` holds one of each
DIALECT_NAMES: tuple[DialectName, ...] = get_args(DialectName)

EnforcementLevel: TypeAlias = Literal["auto", "prompt", "prefill", "constrained"]
#: an enforcement level as used for one request (``auto`` resolved)
Level: TypeAlias = Literal["prompt", "prefill", "constrained"]

#: the language policies (:mod:`agentfsm.policy`), in the order a run consults them by default
PolicyName: TypeAlias = Literal["refusal", "answers", "clauses", "grounding", "relevance", "coverage"]
#: the policy names in order; the registry in :mod:`agentfsm.policy` holds one of each
POLICY_NAMES: tuple[PolicyName, ...] = get_args(PolicyName)
#: the policies a run consults unless told otherwise: the language-neutral ones (values
#: copied from the conversation, digits; an answer's trailing loop) and ``refusal`` (English
#: refusal phrases sent back for another try; kept until the quality table, held-out split
#: included, shows whether it earns its place). ``clauses``, ``relevance`` and ``coverage``
#: read English words to decide whether a request is about a tool and are opt-in
#: (``--policies``): that is the model's to decide (:mod:`agentfsm.engine.choice`)
DEFAULT_POLICIES: tuple[PolicyName, ...] = ("refusal", "answers", "grounding")
