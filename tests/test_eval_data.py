"""Loading BFCL cases: fixtures in BFCL's layout, and the installed bfcl-eval data."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm.core.errors import UsageError
from agentfsm.eval.bfcl_data import (
    AST_CATEGORIES,
    CATEGORIES,
    bfcl_data_dir,
    gorilla_to_json_schema,
    load_cases,
    parse_categories,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bfcl"


def test_fixture_cases_load_with_answers_and_the_python_hint() -> None:
    cases = load_cases("simple_python", data_dir=FIXTURES)
    assert [c.id for c in cases] == ["simple_python_0", "simple_python_1", "simple_python_2"]
    first = cases[0]
    assert first.messages == ({"role": "user", "content": "What is the weather in Paris in celsius?"},)
    assert first.functions[0]["description"].endswith("Note that the provided function is in Python 3 syntax.")
    assert first.ground_truth is not None and "weather.get" in first.ground_truth[0]
    assert first.tools[0].name == "weather.get"


def test_relevance_categories_have_no_answer_key() -> None:
    cases = load_cases("irrelevance", limit=1, data_dir=FIXTURES)
    assert len(cases) == 1 and cases[0].ground_truth is None


def test_gorilla_types_become_json_schema() -> None:
    schema = gorilla_to_json_schema(
        {
            "type": "dict",
            "properties": {
                "r": {"type": "float"},
                "t": {"type": "tuple", "items": {"type": "integer"}},
                "d": {"type": "dict", "properties": {"x": {"type": "any"}, "l": {"type": "list", "items": {"type": "dict"}}}},
                "odd": {"type": "mystery"},
            },
            "required": ["r"],
        }
    )
    props = schema["properties"]
    assert schema["type"] == "object" and schema["required"] == ["r"]
    assert props["r"]["type"] == "number"
    assert props["t"] == {"type": "array", "items": {"type": "integer"}}
    assert props["d"]["type"] == "object"
    assert props["d"]["properties"]["x"]["type"] == "string"
    assert props["d"]["properties"]["l"]["items"]["type"] == "object"
    assert props["odd"]["type"] == "string"


def test_parse_categories() -> None:
    assert parse_categories("simple,multiple, simple_python") == ("simple_python", "multiple")
    assert parse_categories("all") == ("simple_python", "multiple", "parallel", "irrelevance")
    with pytest.raises(UsageError, match="unknown BFCL category"):
        parse_categories("simple_cobol")
    assert parse_categories("simple_java,simple_javascript") == ("simple_java", "simple_javascript")
    with pytest.raises(UsageError):
        parse_categories(" , ")


@pytest.mark.parametrize("category", CATEGORIES)
def test_installed_bfcl_data_loads(category: str) -> None:
    assert (bfcl_data_dir() / f"BFCL_v4_{category}.json").is_file()
    cases = load_cases(category, limit=3)
    assert len(cases) == 3
    assert all(c.category == category and c.tools for c in cases)
    assert all((c.ground_truth is not None) == (category in AST_CATEGORIES) for c in cases)
