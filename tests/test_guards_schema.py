"""Tests for the schema-mismatch guard, including its safety on hostile client schemas."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm.core.parsed import ParsedReply
from agentfsm.guards import _linear_regex, schema
from agentfsm.guards.base import ACCEPT, Accept, Correction
from agentfsm.core.messages import ToolCall, ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
)


def _reply(*calls: tuple[str, dict[str, Any]]) -> ParsedReply:
    return ParsedReply(
        content=None,
        tool_calls=tuple(
            ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)
        ),
    )


def test_accepts_matching_arguments() -> None:
    reply = _reply(("get_weather", {"city": "Paris", "unit": "celsius", "days": 3}))
    assert schema.check(reply, [WEATHER]) == ACCEPT


def test_leaves_unknown_tools_to_their_guard() -> None:
    assert schema.check(_reply(("nope", {"x": 1})), [WEATHER]) == ACCEPT


def test_mismatch_quotes_path_error_and_excerpt() -> None:
    reply = _reply(
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo", "unit": "kelvin"})
    )
    verdict = schema.check(reply, [WEATHER])
    assert isinstance(verdict, Correction)
    assert verdict.reason == "schema_mismatch"
    assert verdict.guard == "schema"
    assert verdict.call_index == 1
    assert "at arguments.unit:" in verdict.message
    assert "'kelvin' is not one of ['celsius', 'fahrenheit']" in verdict.message
    assert 'Schema: {"enum": ["celsius", "fahrenheit"], "type": "string"}' in verdict.message
    assert "Call get_weather again with corrected arguments." in verdict.message


@pytest.mark.parametrize(
    ("arguments", "path", "keyword", "error"),
    [
        ({}, "arguments", "required", "'city' is a required property"),
        ({"city": "Oslo", "days": 9}, "arguments.days", "maximum", "9 is greater than the maximum"),
        ({"city": 5}, "arguments.city", "type", "5 is not of type 'string'"),
        ({"city": "Oslo", "wind": 1}, "arguments", "additionalProperties", "'wind' was unexpected"),
    ],
)
def test_mismatch_fields(arguments: dict[str, Any], path: str, keyword: str, error: str) -> None:
    result = schema.validate_arguments(arguments, WEATHER.parameters)
    assert result.mismatch is not None
    assert result.mismatch.path == path
    assert result.mismatch.keyword == keyword
    assert error in result.mismatch.error
    assert result.mismatch.excerpt.startswith(f'{{"{keyword}": ')


def test_nested_paths() -> None:
    params = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"properties": {"a b": {"type": "string"}}}}
        },
    }
    result = schema.validate_arguments({"items": [{}, {"a b": 2}]}, params)
    assert result.mismatch is not None
    assert result.mismatch.path == 'arguments.items[1]["a b"]'


def test_excerpt_is_trimmed() -> None:
    params = {"type": "object", "required": ["x"], "description": "d" * 2000}
    result = schema.validate_arguments({}, params)
    assert result.mismatch is not None
    assert len(result.mismatch.excerpt) == schema.EXCERPT_CHARS
    assert result.mismatch.excerpt.endswith("...")


def test_catastrophic_pattern_is_structurally_safe() -> None:
    params = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}
    result = schema.validate_arguments({"name": "a" * 10_000 + "!"}, params)
    assert result.mismatch is not None
    assert result.mismatch.keyword == "pattern"
    assert "does not match '^(a+)+$'" in result.mismatch.error
    assert schema.validate_arguments({"name": "aaaa"}, params).mismatch is None


def test_catastrophic_pattern_properties_are_structurally_safe() -> None:
    params = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    hostile = schema.validate_arguments({"a" * 60 + "!": 1}, params)
    assert hostile.mismatch is not None
    assert hostile.mismatch.keyword == "additionalProperties"
    assert "'^(a+)+$'" in hostile.mismatch.error  # the client's regex, not the rewrite
    assert '"^(a+)+$"' in hostile.mismatch.excerpt
    typed = schema.validate_arguments({"aaa": "x"}, params)
    assert typed.mismatch is not None
    assert typed.mismatch.path == "arguments.aaa"
    assert schema.validate_arguments({"aaa": 1, "a": 2}, params).mismatch is None


def test_unsupported_pattern_is_skipped_with_a_note() -> None:
    params = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(x)\\1"}}}
    result = schema.validate_arguments({"a": "xy"}, params)
    assert result.mismatch is None
    assert "not checked (unsupported)" in result.note


def test_pattern_work_is_capped_per_check() -> None:
    pattern = "^[a-z]+[0-9]*x?y?z?$"
    params = {"type": "object", "additionalProperties": {"pattern": pattern}}
    # each string is fine alone; together they exceed the per-check regex budget
    strings = {f"k{i}": "a" * 30_000 for i in range(5)}
    assert 5 * (_linear_regex.work(pattern, strings["k0"]) or 0) > schema.MAX_PATTERN_WORK
    result = schema.validate_arguments(strings, params)
    assert result.mismatch is None
    assert "size bound" in result.note


@pytest.mark.parametrize(
    ("parameters", "note"),
    [
        ({"type": "nope"}, "invalid client schema"),
        ({"properties": {"a": {"$ref": "https://example.com/remote.json"}}}, "Unresolvable"),
        ({"type": "object", "description": "x" * 70_000}, "schema over"),
        (
            {"type": "object", "patternProperties": {"(?=a)": {"type": "string"}}},
            "patternProperties regex",
        ),
    ],
)
def test_client_schemas_never_crash(parameters: dict[str, Any], note: str) -> None:
    result = schema.validate_arguments({"a": 1}, parameters)
    assert result.mismatch is None
    assert note in result.note


def test_oversized_arguments_are_not_validated() -> None:
    result = schema.validate_arguments({"a": "x" * 300_000}, {"type": "object"})
    assert result.mismatch is None
    assert "arguments over" in result.note


def test_declared_draft_is_honoured() -> None:
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}},
    }
    result = schema.validate_arguments({"n": 5}, draft4)
    assert result.mismatch is not None
    assert result.mismatch.keyword == "maximum"


_LISTED = {
    "type": "object",
    "properties": {
        "is_unisex": {"type": "boolean", "enum": ["True", "False", "dontcare"]},  # as BFCL live writes it
        "mode": {"type": "string", "enum": ["a", 1]},
        "flag": {"type": "integer", "const": True},
    },
}


@pytest.mark.parametrize("arguments, keyword", [
    ({"is_unisex": "True"}, None),  # listed: the client's intent, whatever "type" says
    ({"is_unisex": "dontcare"}, None),
    ({"is_unisex": True}, "enum"),  # of the type, but not listed
    ({"is_unisex": "yes"}, "type"),  # neither
    ({"mode": 1}, None),
    ({"mode": 1.0}, None),  # the same JSON number
    ({"mode": True}, "type"),  # true is not 1
    ({"mode": "b"}, "enum"),
    ({"flag": True}, None),
    ({"flag": 1}, "const"),
])
def test_a_value_the_schema_lists_passes_its_type(arguments: dict[str, Any], keyword: str | None) -> None:
    found = schema.validate_arguments(arguments, _LISTED).mismatch
    assert (found.keyword if found else None) == keyword


def test_notes_reach_the_accept_detail() -> None:
    tool = ToolSpec(name="f", parameters={"type": "nope"})
    verdict = schema.check(_reply(("f", {})), [tool])
    assert isinstance(verdict, Accept)
    assert verdict.detail.startswith("call 0 (f): invalid client schema")


def test_arguments_past_the_size_bound_are_noted_not_validated() -> None:
    """The bound is on the arguments' compact JSON in bytes; what orjson cannot write (an
    integer past 64 bits, a non-string key) is measured the same way by json."""
    at_bound = {"city": "x" * (schema.MAX_ARGUMENT_CHARS - len('{"city":""}'))}
    assert schema.validate_arguments(at_bound, WEATHER.parameters).note == ""
    over = {"city": "é" * (schema.MAX_ARGUMENT_CHARS // 2)}  # two bytes each
    outcome = schema.validate_arguments(over, WEATHER.parameters)
    assert outcome.mismatch is None and "bytes of JSON, not validated" in outcome.note
    huge = {"city": "Paris", "days": 10**30}
    found = schema.validate_arguments(huge, WEATHER.parameters).mismatch
    assert found is not None and found.keyword == "maximum"
    assert schema.validate_arguments({1: "x"}, {"type": "object"}).note == ""


# --- no quadratic keyword (issue 29, item 5) ----------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from jsonschema import Draft201909Validator, Draft202012Validator  # noqa: E402

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, -0.0, 2.5]) | st.sampled_from(["a", "b", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_json, max_size=6))
def test_linear_unique_items_gives_jsonschemas_verdicts(items: list[Any]) -> None:
    from jsonschema._utils import uniq

    from agentfsm.guards._keywords import unique

    assert unique(items) == uniq(items)


_SCHEMAS_UNEVALUATED = [
    {"prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
    {"prefixItems": [{}], "contains": {"type": "string"}, "unevaluatedItems": False},
    {"anyOf": [{"prefixItems": [{}, {}]}, {"items": {"type": "integer"}}], "unevaluatedItems": False},
    {"properties": {"a": {}}, "unevaluatedProperties": False},
    {"properties": {"a": {}}, "patternProperties": {"^b": {}}, "unevaluatedProperties": {"type": "integer"}},
    {"allOf": [{"properties": {"a": {}}}], "anyOf": [{"properties": {"b": {"type": "string"}}}], "unevaluatedProperties": False},
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_SCHEMAS_UNEVALUATED), _json, st.sampled_from([Draft202012Validator, Draft201909Validator]))
def test_linear_unevaluated_keywords_give_jsonschemas_verdicts(schema: dict[str, Any], instance: Any, base: Any) -> None:
    from agentfsm.guards._budget import BUDGET, Budget
    from agentfsm.guards.schema import _safe_class

    original = base(schema)
    linear = _safe_class(base)(schema)
    token = BUDGET.set(Budget())  # the safe class counts its work in a validation's budget
    try:
        assert [e.message for e in linear.iter_errors(instance)] == [e.message for e in original.iter_errors(instance)]
    finally:
        BUDGET.reset(token)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}},
        {"type": "object", "properties": {"xs": {"type": "array", "prefixItems": [{}], "unevaluatedItems": {"type": "object"}}}},
        {"type": "object", "properties": {"xs": {"type": "object", "properties": {"k0": {}}, "unevaluatedProperties": {"type": "integer"}}}},
    ],
    ids=["uniqueItems", "unevaluatedItems", "unevaluatedProperties"],
)
def test_validation_work_grows_linearly_with_the_arguments(schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # defect: a 51 KB array stalled every client 11 s, 213 KB took 255 s (pairwise comparisons,
    # membership tests in lists); counted here in comparisons and descents, not in seconds
    import jsonschema._keywords
    import jsonschema._utils

    calls = {"equal": 0, "scanned": 0}
    real_equal = jsonschema._utils.equal

    def counting_equal(one: Any, two: Any) -> bool:
        calls["equal"] += 1
        return bool(real_equal(one, two))

    class Scanned(list[Any]):
        def __contains__(self, item: object) -> bool:
            calls["scanned"] += len(self)  # a membership test in a list reads it all
            return super().__contains__(item)

    monkeypatch.setattr(jsonschema._utils, "equal", counting_equal)
    for name in ("find_evaluated_item_indexes_by_schema", "find_evaluated_property_keys_by_schema"):
        real = getattr(jsonschema._utils, name)
        counting = lambda *args, real=real: Scanned(real(*args))  # noqa: E731
        monkeypatch.setattr(jsonschema._keywords, name, counting, raising=False)
        monkeypatch.setattr(jsonschema._utils, name, counting)
    n = 3000
    if "uniqueItems" in str(schema):
        arguments: dict[str, Any] = {"xs": [{"i": i, "v": [i]} for i in range(n)]}
    elif "unevaluatedItems" in str(schema):
        arguments = {"xs": [{"i": i} for i in range(n)]}
    else:
        arguments = {"xs": {f"k{i}": i for i in range(n)}}
    from agentfsm.guards.schema import validate_arguments

    outcome = validate_arguments(arguments, schema)
    assert outcome.mismatch is None and outcome.note == ""
    assert calls["equal"] <= 2 * n and calls["scanned"] <= 2 * n, calls
    duplicate = validate_arguments({"xs": [{"a": 1, "b": [1.0]}, {"b": [1], "a": 1}]}, schema) if "unique" in str(schema) else None
    if duplicate is not None:
        assert duplicate.mismatch is not None and duplicate.mismatch.keyword == "uniqueItems"
