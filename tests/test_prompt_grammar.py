"""grammar_schema: every client schema builds a llama.cpp grammar, or a looser one.

The grammars are built the way the local backend builds them
(``LlamaGrammar.from_json_schema`` on :func:`build_action_schema`'s output, and the
list-continuation GBNF), against hand-made hostile shapes, every tool schema of the
BFCL data, and the tool sets Claude Code and Codex really sent
(``fixtures/clients``, captured from the real clients).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import llama_cpp
import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from agentfsm.core.choice import ToolChoice
from agentfsm.backends.local import continuation_gbnf
from agentfsm.core.backend import ListContinuation
from agentfsm.core.messages import ToolSpec
from agentfsm.eval.bfcl_data import bfcl_data_dir, tool_specs
from agentfsm.prompt.enforcement import action_item_schema, build_action_schema
from agentfsm.prompt.grammar import ANY_TYPES, MAX_REPEAT, any_value, grammar_schema

CLIENTS = Path(__file__).resolve().parent.parent / "fixtures" / "clients"


def _builds(schema: dict[str, Any]) -> None:
    """The grammar of ``schema`` compiles, by both routes the local backend takes."""
    text = json.dumps(schema)
    assert llama_cpp.LlamaGrammar.from_json_schema(text, verbose=False) is not None
    gbnf = continuation_gbnf(json_schema_to_gbnf(text), ListContinuation(item_schema=schema))
    assert llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False) is not None


def _tool(parameters: Any) -> ToolSpec:
    return ToolSpec(name="t", description="", parameters={"type": "object", "properties": {"p": parameters}})


HOSTILE: dict[str, Any] = {
    "description only": {"description": "any value, as JSON"},
    "empty": {},
    "true": True,
    "false": False,
    "type list": {"type": ["string", "null"]},
    "type list with object": {"type": ["object", "null"], "properties": {"a": {"type": "integer"}}},
    "unknown type": {"type": "File"},
    "python type names": {"type": "dict", "properties": {"x": {"type": "float"}, "y": {"type": "tuple"}}},
    "ref to defs": {"$ref": "#/$defs/point"},
    "ref to definitions": {"$ref": "#/definitions/point"},
    "recursive ref": {"$ref": "#/$defs/node"},
    "remote ref": {"$ref": "https://example.com/schema.json"},
    "broken ref": {"$ref": "#/$defs/missing"},
    "ref with siblings": {"$ref": "#/$defs/point", "description": "where"},
    "anyOf": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    "oneOf with base": {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {}]},
    "allOf": {"allOf": [{"$ref": "#/$defs/point"}, {"properties": {"z": {"type": "number"}}, "required": ["z"]}]},
    "anyOf of nothing": {"anyOf": []},
    "additionalProperties true": {"type": "object", "additionalProperties": True},
    "additionalProperties false": {"type": "object", "additionalProperties": False},
    "additionalProperties schema": {"type": "object", "additionalProperties": {"type": "integer"}},
    "additionalProperties description": {"type": "object", "additionalProperties": {"description": "x"}},
    "mixed enum": {"enum": ["a", 1, 2.5, None, True, {"k": [1]}]},
    "empty enum": {"type": "string", "enum": []},
    "mixed const": {"const": {"a": [1, "b", None]}},
    "format": {"type": "string", "format": "date-time"},
    "unknown format": {"type": "string", "format": "hostname"},
    "pattern with lookahead": {"type": "string", "pattern": "(?=a)b+"},
    "pattern unanchored": {"type": "string", "pattern": "[a-z"},
    "huge maxLength": {"type": "string", "maxLength": 524288},
    "huge maxItems": {"type": "array", "items": {"type": "string"}, "minItems": 1000, "maxItems": 100000},
    "tuple items": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
    "prefixItems": {"type": "array", "prefixItems": [{"type": "string"}, {}]},
    "items true": {"type": "array", "items": True},
    "not / if / then": {"not": {"type": "string"}, "if": {}, "then": {}, "else": {}},
    "patternProperties": {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
    "odd names": {"type": "object", "properties": {'q"uote': {}, "sp ace": {}, "root": {}, "space": {}, "é": {}}},
    "malformed": {"type": "object", "properties": ["a"], "required": "a", "items": 3, "enum": "x"},
    "deep": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {}}}}}}}}}}}}}}}}}}}}}}}}}}}}},
}
DEFS = {
    "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]},
    "node": {"type": "object", "properties": {"value": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_hostile_shape_builds_a_grammar(name: str) -> None:
    tool = ToolSpec(
        name="t",
        description="",
        parameters={"type": "object", "properties": {"p": HOSTILE[name]}, "$defs": DEFS, "definitions": DEFS},
    )
    for compact in (False, True):
        _builds(build_action_schema([tool], ToolChoice.parse("auto"), parallel=True, compact=compact))


def test_a_whole_schema_of_each_shape_builds_too() -> None:
    for name, shape in HOSTILE.items():
        root = {**shape, "$defs": DEFS} if isinstance(shape, dict) else shape
        _builds(grammar_schema(root))
        tool = ToolSpec(name="t", description="", parameters=root if isinstance(root, dict) else {})
        schema = action_item_schema([tool], ToolChoice.parse("auto"))
        assert schema is not None
        _builds(schema)


def test_degradations_are_looser_not_stricter() -> None:
    anything = any_value()
    assert grammar_schema({"description": "x"}) == {**anything, "description": "x"}
    assert grammar_schema({}) == anything
    assert grammar_schema({"$ref": "https://example.com/s.json"}) == anything
    assert grammar_schema({"type": ["string", "null"]}) == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert grammar_schema({"type": "string", "pattern": "^a$", "format": "email", "maxLength": 3}) == {"type": "string"}
    assert grammar_schema({"type": "array", "maxItems": MAX_REPEAT + 1}) == {"type": "array"}
    point = grammar_schema({"$ref": "#/$defs/p", "$defs": DEFS | {"p": DEFS["point"]}})
    assert point["properties"] == {"x": {"type": "number"}, "y": {"type": "number"}}
    merged = grammar_schema({"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {}}}]})
    assert set(merged["properties"]) == {"a", "b"} and merged["required"] == ["a"]
    assert grammar_schema({"type": "object", "additionalProperties": {"type": "integer"}})["additionalProperties"] == {"type": "integer"}


def test_recursion_and_width_are_bounded() -> None:
    node = grammar_schema({"$ref": "#/$defs/node", "$defs": DEFS})
    depth = 0
    while "properties" in node:
        node = node["properties"]["children"]["items"]
        depth += 1
    assert node["type"] == list(ANY_TYPES) and depth < 12
    wide = {"type": "object", "properties": {f"p{i}": {"$ref": "#/$defs/node"} for i in range(50)}, "$defs": DEFS}
    assert len(json.dumps(grammar_schema(wide))) < 400_000


def test_degraded_grammar_schema_accepts_what_the_client_schema_accepts() -> None:
    # looser, never stricter: a value valid against the client's schema is valid against ours
    cases = [
        ({"type": "object", "properties": {"args": {"description": "anything"}}}, {"args": [1, {"a": None}]}),
        ({"type": ["string", "null"]}, None),
        ({"$ref": "#/$defs/point", "$defs": DEFS}, {"x": 1.5}),
        ({"type": "string", "pattern": "^wf_[a-z0-9-]{6,}$"}, "wf_abcdef"),
        ({"anyOf": [{"type": "integer"}, {"type": "string", "format": "date"}]}, "2024-01-02"),
        ({"enum": ["a", 1, None]}, None),
    ]
    for client, value in cases:
        jsonschema.validate(value, client)
        jsonschema.validate(value, grammar_schema(client))


def _bfcl_functions() -> list[dict[str, Any]]:
    root = bfcl_data_dir()
    unique: dict[str, dict[str, Any]] = {}
    for path in sorted(root.glob("BFCL_v4_*.json")) + sorted((root / "multi_turn_func_doc").glob("*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("{\""):
                continue  # format_sensitivity.json is one indented object, not cases
            row = json.loads(line)
            functions = row.get("function", [row] if "parameters" in row else [])
            for f in functions:
                unique[json.dumps(f, sort_keys=True)] = f
    return list(unique.values())


def test_every_bfcl_tool_schema_builds_a_grammar() -> None:
    functions = _bfcl_functions()
    assert len(functions) > 3000  # every category, multi-turn function docs included
    for spec in tool_specs(functions):
        schema = build_action_schema([spec], ToolChoice.parse("auto"))
        assert llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False) is not None


def _client_tools(name: str) -> list[ToolSpec]:
    body = json.loads((CLIENTS / name).read_text(encoding="utf-8"))["body"]
    specs: list[ToolSpec] = []
    for tool in body["tools"]:
        if "input_schema" in tool:
            specs.append(ToolSpec.from_anthropic(tool))
        for fn in [tool] if tool.get("type") == "function" else tool.get("tools", []):
            if fn.get("type") == "function":
                specs.append(ToolSpec(name=fn["name"], description=fn.get("description", ""), parameters=fn.get("parameters") or {}))
    return specs


@pytest.mark.parametrize(
    "fixture", ["claude_code_request.json", "claude_code_request_full_tools.json", "codex_request.json"]
)
def test_client_tool_sets_build_a_grammar_each_and_all_together(fixture: str) -> None:
    tools = _client_tools(fixture)
    assert len(tools) >= 9
    for tool in tools:
        _builds(build_action_schema([tool], ToolChoice.parse("required")))
    _builds(build_action_schema(tools, ToolChoice.parse("auto"), parallel=True))
    _builds(build_action_schema(tools, ToolChoice.parse("required"), parallel=True, compact=True))


def test_claude_code_workflow_args_is_any_value() -> None:
    workflow = next(t for t in _client_tools("claude_code_request_full_tools.json") if t.name == "Workflow")
    args = grammar_schema(workflow.parameters)["properties"]["args"]
    assert args["type"] == list(ANY_TYPES)
