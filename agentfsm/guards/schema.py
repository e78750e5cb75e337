"""Schema mismatch: each call's arguments are validated against its tool's JSON Schema.

The correction quotes the offending path (``arguments.unit``), the validator's error,
and an excerpt of the sub-schema that failed (the failing keyword first, ~300 chars).

Client schemas are untrusted input, and so are the model's arguments: validation is made
safe by construction, and runs in time linear in the arguments' size:

- ``pattern`` never reaches Python's backtracking ``re``: the keyword is replaced by
  a linear-time matcher (:mod:`agentfsm.guards._linear_regex`), bounded per string
  and per check; what it cannot decide (look-around, back-references ...) is skipped
  with a note rather than run.
- ``patternProperties`` regexes (which ``jsonschema`` matches with ``re`` in several
  places) are rewritten before validation into an anchored alternation of exactly
  the argument keys they match, decided by the same linear matcher; the rewrite is
  mapped back in the message and the excerpt.
- ``uniqueItems``, ``unevaluatedItems`` and ``unevaluatedProperties``, quadratic in
  ``jsonschema`` (a 51 KB array stalled the proxy 11 s), are replaced by linear
  implementations with the same verdicts (:mod:`agentfsm.guards._keywords`).
- a value the schema lists by name (an ``enum`` member, the ``const``) passes ``type``:
  a client schema such as ``{"type": "boolean", "enum": ["True", "False"]}`` (BFCL's
  live set has them; so do schemas converted from other formats) admits no value at
  all as written, and the grammar writes the listed ones, so every call was refused
  until the budget ran out. The listed values are taken as the client's intent;
  anything else still fails ``enum``.
- every keyword evaluation, and every error one yields, counts against
  :data:`MAX_KEYWORD_STEPS`: a small schema whose ``$ref`` / ``allOf`` / ``anyOf``
  branches name the next level twice is exponential in its nesting, and past the bound
  the call is accepted with a note.
- schemas over :data:`MAX_SCHEMA_CHARS`, arguments over :data:`MAX_ARGUMENT_CHARS`,
  invalid schemas (``SchemaError``), unresolvable ``$ref`` (no remote retrieval: an
  empty ``referencing.Registry`` is passed) and too-deep instances are accepted with a
  note in ``Accept.detail``: the guard never crashes on a client schema.
"""

from __future__ import annotations


import json
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator
from pydantic import BaseModel, ConfigDict
from referencing import Registry

from agentfsm.core._memo import JSON_OBJECT_FACTOR, ByIdentity
from agentfsm.core._types import JSONObject
from agentfsm.core.parsed import ParsedReply
from agentfsm.guards._budget import BUDGET as _BUDGET
from agentfsm.guards._budget import MAX_KEYWORD_STEPS, MAX_PATTERN_WORK, counted
from agentfsm.guards._budget import Budget as _Budget
from agentfsm.guards._budget import Undecided as _Undecided
from agentfsm.guards._budget import trim as _trim
from agentfsm.guards._keywords import canonical, linear
from agentfsm.guards._plain_schema import plain_check
from agentfsm.guards.base import ACCEPT, Accept, Correction, Verdict
from agentfsm.core.messages import ToolSpec

__all__ = [
    "EXCERPT_CHARS",
    "GUARD",
    "MAX_ARGUMENT_CHARS",
    "MAX_KEYS",
    "MAX_KEYWORD_STEPS",
    "MAX_PATTERN_WORK",
    "MAX_SCHEMA_CHARS",
    "Mismatch",
    "SchemaCheck",
    "check",
    "validate_arguments",
]

GUARD = "schema"
#: schemas larger than this (serialized) are not validated
MAX_SCHEMA_CHARS = 64_000
#: arguments larger than this (serialized as compact JSON, in UTF-8 bytes) are not validated
MAX_ARGUMENT_CHARS = 256_000
#: distinct object keys in the arguments beyond which ``patternProperties`` is not decided
MAX_KEYS = 1_000
#: length of the schema excerpt quoted in a correction
EXCERPT_CHARS = 300
_MESSAGE_CHARS = 300


class Mismatch(BaseModel):
    """One validation error: where, what, and the schema excerpt that failed."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    error: str
    excerpt: str
    keyword: str


class SchemaCheck(BaseModel):
    """The outcome of validating one set of arguments: a mismatch, or none; notes for logs."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    mismatch: Mismatch | None = None
    note: str = ""


#: the outcome of arguments that match their schema with nothing to note
_VALID = SchemaCheck()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


#: a tool's schema serialised once, not per call (a ToolSpec's schema is not changed in place)
_schema_text: ByIdentity[Any, str] = ByIdentity(
    _dumps, 256, max_bytes=8 << 20, weigh=lambda schema, text: len(text) * (1 + JSON_OBJECT_FACTOR)
)


def _size(arguments: Any) -> int:
    """The arguments' size as compact JSON (orjson's; json's for what orjson refuses:
    an integer past 64 bits, a non-string key, nesting past 254 levels)."""
    try:
        return len(orjson.dumps(arguments, default=str))
    except TypeError:
        return len(json.dumps(arguments, ensure_ascii=False, default=str, separators=(",", ":")).encode())


def _json_path(parts: Sequence[Any]) -> str:
    out = "arguments"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{_dumps(part)}]"
    return out


@lru_cache(maxsize=128)
def _schema_error(serialized: str) -> str | None:
    """``None`` when the schema is valid for its draft, else the SchemaError message."""
    schema = json.loads(serialized)
    try:
        _validator_class(schema).check_schema(schema)
    except SchemaError as exc:
        return exc.message
    except Exception as exc:  # hostile schemas can break the meta-validation itself
        return f"{type(exc).__name__}: {exc}"
    return None


def _validator_class(schema: Any) -> type[Validator]:
    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    if not isinstance(declared, str):
        return Draft202012Validator
    return validators.validator_for({"$schema": declared}, default=Draft202012Validator)


def _extend(base: type[Validator], keywords: dict[str, Any]) -> type[Validator]:
    extend: Any = validators.extend  # untyped in the stubs
    cls: type[Validator] = extend(base, keywords)
    return cls


def _collect_keys(value: Any, keys: set[str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            keys.add(str(key))
            if len(keys) > MAX_KEYS:
                raise _Undecided(f"more than {MAX_KEYS} keys in the arguments")
            _collect_keys(item, keys)
    elif isinstance(value, list):
        for item in value:
            _collect_keys(item, keys)


def _rewrite_pattern_properties(
    schema: Any, keys: set[str], budget: _Budget, originals: dict[str, str]
) -> Any:
    """Copy ``schema``, replacing every ``patternProperties`` regex by the keys it matches."""
    if isinstance(schema, list):
        return [_rewrite_pattern_properties(s, keys, budget, originals) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for name, value in schema.items():
        if name == "patternProperties" and isinstance(value, Mapping):
            rewritten: dict[str, Any] = {}
            for regex, sub in value.items():
                matched = []
                for key in sorted(keys):
                    hit = budget.search(str(regex), key)
                    if hit is None:
                        raise _Undecided(f"patternProperties regex {_trim(str(regex), 60)!r}")
                    if hit:
                        matched.append(re.escape(key))
                body = f"^(?:{'|'.join(matched)})\\Z" if matched else "(?!)"
                safe = f"{body}(?#{len(originals)})"  # the comment keeps rewrites distinct
                originals[safe] = str(regex)
                rewritten[safe] = _rewrite_pattern_properties(sub, keys, budget, originals)
            out[name] = rewritten
        else:
            out[name] = _rewrite_pattern_properties(value, keys, budget, originals)
    return out


def _restore(value: Any, originals: Mapping[str, str]) -> Any:
    if isinstance(value, list):
        return [_restore(v, originals) for v in value]
    if not isinstance(value, Mapping):
        return value
    return {
        originals.get(k, k) if isinstance(k, str) else k: _restore(v, originals)
        for k, v in value.items()
    }


def _excerpt(error: ValidationError, originals: Mapping[str, str]) -> str:
    schema = _restore(error.schema, originals)
    if isinstance(schema, Mapping):
        keyword = str(error.validator)
        first = [k for k in (keyword, "type") if k in schema]
        ordered = {k: schema[k] for k in first} | {
            k: v for k, v in schema.items() if k not in first
        }
        return _trim(_dumps(ordered), EXCERPT_CHARS)
    return _trim(_dumps(schema), EXCERPT_CHARS)


def _pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not isinstance(patrn, str) or not validator.is_type(instance, "string"):
        return
    if _BUDGET.get().search(patrn, instance) is False:
        yield ValidationError(f"{_trim(repr(instance), 80)} does not match {patrn!r}")


def _listed(instance: Any, schema: Any) -> bool:
    """Whether ``instance`` is a value ``schema`` names: one of its ``enum`` members or its
    ``const`` (JSON Schema's equality, :func:`~agentfsm.guards._keywords.canonical`:
    ``true`` is not ``1``, ``1`` is ``1.0``)."""
    if not isinstance(schema, Mapping):
        return False
    named = list(schema["enum"]) if isinstance(schema.get("enum"), list) else []
    if "const" in schema:
        named.append(schema["const"])
    wanted = canonical(instance)
    return any(canonical(m) == wanted for m in named)


def _type_unless_listed(original: Any) -> Any:
    """``type``, passing a value the same schema lists by name (see the module doc)."""

    def check(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if _listed(instance, schema):
            return
        yield from original(validator, types, instance, schema)

    return check


@lru_cache(maxsize=16)
def _safe_class(base: type[Validator]) -> type[Validator]:
    """``base`` with the bounded-time ``pattern`` keyword, linear ``uniqueItems``,
    ``unevaluatedItems``, ``unevaluatedProperties``, ``type`` passing a listed value, and
    every keyword counted (:data:`MAX_KEYWORD_STEPS`) (building a class costs ~3 ms)."""
    keywords = {"pattern": _pattern, **linear(base.VALIDATORS)}
    if "type" in base.VALIDATORS:
        keywords["type"] = _type_unless_listed(base.VALIDATORS["type"])
    every = {name: counted(keywords.get(name, original)) for name, original in base.VALIDATORS.items()}
    return _extend(base, every)


@lru_cache(maxsize=256)
def _plain_validator(serialized: str) -> Validator | None:
    """The validator of a schema without ``patternProperties``, built once per schema
    (validators are immutable and reusable); ``None`` for one that has them, whose
    regexes are rewritten per call against the arguments' keys."""
    if '"patternProperties"' in serialized:
        return None
    schema = json.loads(serialized)
    return _safe_class(_validator_class(schema))(schema, registry=Registry())


def validate_arguments(arguments: Any, parameters: JSONObject) -> SchemaCheck:
    """Validate ``arguments`` (a call's, or any JSON value) against the ``parameters``
    schema, safely (see module doc)."""
    try:
        schema_text = _schema_text(parameters)
        args_size = _size(arguments)
    except (TypeError, ValueError, RecursionError) as exc:
        return SchemaCheck(note=f"not serializable, not validated: {exc}")
    if len(schema_text) > MAX_SCHEMA_CHARS:
        return SchemaCheck(note=f"schema over {MAX_SCHEMA_CHARS} characters, not validated")
    if args_size > MAX_ARGUMENT_CHARS:
        return SchemaCheck(note=f"arguments over {MAX_ARGUMENT_CHARS} bytes of JSON, not validated")
    schema_problem = _schema_error(schema_text)
    if schema_problem is not None:
        problem = _trim(schema_problem, 200)
        return SchemaCheck(note=f"invalid client schema, not validated: {problem}")
    quick = plain_check(schema_text)
    if quick is not None and quick(arguments):
        return _VALID  # what the full validation finds for these arguments (no error, no note)
    budget = _Budget()
    originals: dict[str, str] = {}
    try:
        validator = _plain_validator(schema_text)
        if validator is None:  # patternProperties: rewritten for these arguments' keys
            keys: set[str] = set()
            _collect_keys(arguments, keys)
            safe_schema = _rewrite_pattern_properties(parameters, keys, budget, originals)
            validator = _safe_class(_validator_class(parameters))(safe_schema, registry=Registry())
        token = _BUDGET.set(budget)
        try:
            error = best_match(validator.iter_errors(arguments))
        finally:
            _BUDGET.reset(token)
    except _Undecided as exc:
        return SchemaCheck(note=f"not validated: {exc}")
    except Exception as exc:  # unresolvable $ref, recursion, odd client schemas: never crash
        return SchemaCheck(note=f"not validated: {type(exc).__name__}: {_trim(str(exc), 200)}")
    note = "; ".join(dict.fromkeys(budget.notes))
    if error is None:
        return SchemaCheck(note=note)
    message = error.message
    for safe, original in originals.items():
        message = message.replace(repr(safe), repr(original))
    mismatch = Mismatch(
        path=_json_path(list(error.absolute_path)),
        error=_trim(message, _MESSAGE_CHARS),
        excerpt=_excerpt(error, originals),
        keyword=str(error.validator),
    )
    return SchemaCheck(mismatch=mismatch, note=note)


def check(parsed: ParsedReply, tools: Sequence[ToolSpec]) -> Verdict:
    """Correct the first call whose arguments do not match its tool's schema.

    Calls to tools not in ``tools`` are left to the unknown-tool guard.
    """
    by_name = {tool.name: tool for tool in tools}
    notes: list[str] = []
    for index, call in enumerate(parsed.tool_calls):
        tool = by_name.get(call.name)
        if tool is None:
            continue
        outcome = validate_arguments(call.arguments, tool.parameters)
        if outcome.note:
            notes.append(f"call {index} ({call.name}): {outcome.note}")
        found = outcome.mismatch
        if found is None:
            continue
        message = (
            f"The arguments of {call.name} do not match its schema at {found.path}: "
            f"{found.error}. Schema: {found.excerpt} "
            f"Call {call.name} again with corrected arguments."
        )
        return Correction(
            guard=GUARD,
            reason="schema_mismatch",
            message=message,
            detail=f"call {index} ({call.name}): {found.keyword} at {found.path}: {found.error}",
            call_index=index,
        )
    return Accept(guard=GUARD, detail="; ".join(notes)) if notes else ACCEPT
