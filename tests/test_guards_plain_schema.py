"""The schema guard's quick check: True only where the full validation finds nothing."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agentfsm.guards import schema
from agentfsm.guards._plain_schema import MAX_VALUES, plain_check

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}},
    {"type": "object", "properties": {"on": {"type": "boolean"}, "z": {"type": "null"}}, "additionalProperties": False},
    {"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["unit"]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
    {"type": "object", "properties": {"v": {"type": ["string", "null"], "description": "d"}}, "title": "t"},
    {"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "integer"}},
                                            "required": ["a"], "additionalProperties": False}}},
    {"type": "object", "properties": {"flag": {"type": "boolean", "enum": ["True", "False"]}}},
    {"type": "object"},
]
VALUES: list[Any] = ["Paris", "", 1, 0, -3, 1.0, 2.5, True, False, None, [], ["a"], ["a", 1], {}, {"a": 1},
                     {"a": 1.0}, {"a": 1, "b": 2}, "c", "x", "True"]
NAMES = ["city", "n", "x", "on", "z", "unit", "tags", "v", "o", "flag", "other"]


def _full_errors(s: dict[str, Any], instance: Any) -> list[str]:
    """What plain jsonschema finds (the guard's validator only passes more: listed values)."""
    return [e.message for e in Draft202012Validator(s).iter_errors(instance)]


def _instances() -> list[Any]:
    out: list[Any] = [{}, [], "s", 1]
    for name, value in itertools.product(NAMES, VALUES):
        out.append({name: value})
    for (a, va), (b, vb) in itertools.product(zip(NAMES, VALUES), zip(NAMES[1:], VALUES[3:])):
        out.append({a: va, b: vb})
    return out


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_quick_check_never_accepts_what_the_full_validation_refuses(index: int) -> None:
    s = SCHEMAS[index]
    quick = plain_check(json.dumps(s, ensure_ascii=False))
    assert quick is not None
    accepted = 0
    for instance in _instances():
        if quick(instance):
            accepted += 1
            assert _full_errors(s, instance) == [], (s, instance)
            assert schema.validate_arguments(instance, s) == schema.SchemaCheck()
    assert accepted  # the quick check does answer for this schema


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_the_guards_outcome_is_the_full_validations(index: int) -> None:
    s = SCHEMAS[index]
    for instance in _instances():
        outcome = schema.validate_arguments(instance, s)
        if _full_errors(s, instance):
            # refused by plain jsonschema: refused by the guard too, unless the value is
            # one the schema lists by name (the guard's type passes it)
            listed = isinstance(instance, dict) and any(
                isinstance(sub, dict) and instance.get(k) in sub.get("enum", [])
                for k, sub in s.get("properties", {}).items()
            )
            assert outcome.mismatch is not None or listed, (s, instance)
        else:
            assert outcome == schema.SchemaCheck(), (s, instance)


@pytest.mark.parametrize(
    "s",
    [
        {"type": "object", "properties": {"c": {"type": "string", "pattern": "^a"}}},
        {"type": "object", "properties": {"c": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
        {"type": "object", "properties": {"c": True}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}},
    ],
)
def test_other_schemas_are_left_to_the_full_validation(s: dict[str, Any]) -> None:
    assert plain_check(json.dumps(s, ensure_ascii=False)) is None


def test_large_arguments_are_left_to_the_full_validation() -> None:
    s = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}
    quick = plain_check(json.dumps(s))
    assert quick is not None
    assert quick({"xs": list(range(MAX_VALUES // 2))})
    assert not quick({"xs": list(range(MAX_VALUES))})
    assert schema.validate_arguments({"xs": list(range(MAX_VALUES))}, s) == schema.SchemaCheck()


def test_mismatches_keep_the_full_validations_message() -> None:
    s = SCHEMAS[0]
    outcome = schema.validate_arguments({"city": 1.0}, s)
    assert outcome.mismatch is not None
    assert outcome.mismatch.path == "arguments.city"
    assert outcome.mismatch.keyword == "type"
    assert outcome.mismatch.error == "1.0 is not of type 'string'"
