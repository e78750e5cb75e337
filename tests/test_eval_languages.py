"""BFCL's Java and JavaScript categories: offered as string parameters, typed by BFCL's converters."""

from __future__ import annotations

from agentfsm.eval.bfcl_data import AST_CATEGORIES, load_cases
from agentfsm.eval.checker import check_case
from agentfsm.eval.languages import language_of, prompt_functions


def test_language_is_read_from_the_category_name() -> None:
    assert language_of("simple_javascript") == "javascript"
    assert language_of("simple_java") == "java"
    assert language_of("simple_python") == "python"
    assert language_of("parallel_multiple") == "python"
    assert {"simple_java", "simple_javascript"} <= set(AST_CATEGORIES)


def test_java_parameters_are_offered_as_strings_with_their_type_noted() -> None:
    docs = [
        {
            "name": "f",
            "description": "d",
            "parameters": {
                "type": "dict",
                "properties": {
                    "n": {"type": "integer", "description": "count."},
                    "xs": {"type": "ArrayList", "description": "items.", "items": {"type": "String"}},
                    "o": {"type": "any", "description": "obj."},
                },
            },
        }
    ]
    shown = prompt_functions(docs, "java")
    props = shown[0]["parameters"]["properties"]
    assert {p["type"] for p in props.values()} == {"string"}
    assert props["n"]["description"] == "count. This is Java integer type parameter in string representation."
    assert "items" not in props["xs"] and "elements are of type String" in props["xs"]["description"]
    assert "any type of Java object" in props["o"]["description"]
    assert docs[0]["parameters"]["properties"]["n"]["type"] == "integer"  # the input is left alone
    assert prompt_functions(docs, "python") == docs


def test_installed_java_and_javascript_cases_load_and_score() -> None:
    js = load_cases("simple_javascript", limit=1)[0]
    assert js.functions[0]["description"].endswith("Note that the provided function is in JavaScript syntax.")
    assert all(p["type"] == "string" for p in js.tools[0].parameters["properties"].values())
    assert js.offered == js.prompt_functions != js.functions
    truth = list(js.ground_truth or ())
    name = js.tools[0].name
    right = [{name: {"inputField": "userInputField", "isComplete": "true"}}]
    assert check_case(js.category, list(js.functions), truth, right)["valid"]
    typed = [{name: {"inputField": "userInputField", "isComplete": True}}]
    assert check_case(js.category, list(js.functions), truth, typed)["error_type"] == "type_error:js"
    java = load_cases("simple_java", limit=1)[0]
    call = {java.tools[0].name: {"controller": "mapController", "parent": "mapArea"}}
    assert check_case(java.category, list(java.functions), list(java.ground_truth or ()), [call])["valid"]
    wrong = {java.tools[0].name: {"controller": "other", "parent": "mapArea"}}
    assert not check_case(java.category, list(java.functions), list(java.ground_truth or ()), [wrong])["valid"]
