"""BFCL's Java and JavaScript categories: how their functions are offered and how calls are typed.

BFCL offers a Java or JavaScript function to a model with every parameter typed
``string`` and a note on its real type ("This is Java float type parameter in string
representation."); the model writes each value as source text (``"3.0f"``, ``"[1, 2]"``),
and the checker converts that text with BFCL's own type converters before the usual
type and value checks. :func:`prompt_functions` is a port of BFCL's
``_func_doc_language_specific_pre_processing``; :func:`convert_param` calls the
converters of the installed ``bfcl-eval`` package (pure modules: ``re`` and a type table).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from agentfsm.core.errors import MissingExtraError

__all__ = ["HINTS", "convert_param", "language_of", "prompt_functions"]

#: the note BFCL appends to every function description, by language
HINTS: dict[str, str] = {
    "python": " Note that the provided function is in Python 3 syntax.",
    "java": " Note that the provided function is in Java 8 SDK syntax.",
    "javascript": " Note that the provided function is in JavaScript syntax.",
}
_NESTED = ("Array", "ArrayList", "array")


def language_of(category: str) -> str:
    """``python``, ``java`` or ``javascript``, from a BFCL category name (as BFCL tells them apart)."""
    if "javascript" in category:
        return "javascript"
    return "java" if "java" in category else "python"


def _note(value: dict[str, Any], text: str) -> None:
    value["description"] = value.get("description", "") + text


def prompt_functions(functions: list[dict[str, Any]], language: str) -> list[dict[str, Any]]:
    """The function docs as BFCL hands them to a model (hint already added): Java and
    JavaScript parameters become strings that carry their type in the description."""
    out = copy.deepcopy(functions)
    if language == "python":
        return out
    name = "Java" if language == "java" else "JavaScript"
    for item in out:
        for value in item.get("parameters", {}).get("properties", {}).values():
            if value["type"] == "any":
                _note(value, f" This parameter can be of any type of {name} object in string representation.")
            else:
                _note(value, f" This is {name} {value['type']} type parameter in string representation.")
            if value["type"] in (("ArrayList", "Array") if language == "java" else ("array",)):
                _note(value, f" The list elements are of type {value['items']['type']}; they are not in string representation.")
                del value["items"]
            if language == "javascript" and value["type"] == "dict" and "properties" in value:
                _note(
                    value,
                    " The dictionary entries have the following schema; they are not in string "
                    f"representation. {json.dumps(value['properties'])}",
                )
                del value["properties"]
            value["type"] = "string"
    return out


def convert_param(
    language: str, param: str, value: Any, details: dict[str, Any]
) -> tuple[Any, type, type | None] | dict[str, Any]:
    """A Java or JavaScript value written as source text, converted as BFCL's checker does:
    ``(value, expected type, nested type)``, or BFCL's error result when it is not a string."""
    try:
        from bfcl_eval.constants.type_mappings import JAVA_TYPE_CONVERSION, JS_TYPE_CONVERSION
        from bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter import java_type_converter
        from bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter import js_type_converter
    except ImportError as exc:
        raise MissingExtraError(
            "eval", "the BFCL type converters (package bfcl-eval: pip install --no-deps bfcl-eval==2026.3.23)"
        ) from exc
    table, converter, tag = (
        (JAVA_TYPE_CONVERSION, java_type_converter, "java")
        if language == "java"
        else (JS_TYPE_CONVERSION, js_type_converter, "js")
    )
    expected = details["type"]
    if type(value) != str:  # noqa: E721 - BFCL's exact test
        return {
            "valid": False,
            "error": [
                f"Incorrect type for parameter {param!r}. Expected type String, got "
                f"{type(value).__name__}. Parameter value: {value!r}."
            ],
            "error_type": f"type_error:{tag}",
        }
    nested: type | None = None
    if expected in _NESTED:
        nested_name = details["items"]["type"]
        nested = table[nested_name]
        value = converter(value, expected, nested_name)
    else:
        value = converter(value, expected)
    return value, table[expected], nested
