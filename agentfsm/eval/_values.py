"""The value checks of the BFCL AST checker port: types one level deep, strings, lists, dicts.

Split from :mod:`agentfsm.eval.checker` (which re-exports these names); the rules and
messages are BFCL's, unchanged.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "PYTHON_NESTED_TYPE_CHECK_LIST",
    "PYTHON_TYPE_MAPPING",
    "Result",
    "check_param_value",
    "dict_checker",
    "find_description",
    "get_possible_answer_type",
    "list_checker",
    "list_dict_checker",
    "standardize_string",
    "string_checker",
    "type_checker",
]

Result = dict[str, Any]

PYTHON_TYPE_MAPPING: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
PYTHON_NESTED_TYPE_CHECK_LIST = ("array", "tuple")


def find_description(func_descriptions: Any, name: str) -> Any:
    """The description named ``name`` (a dict is the only function)."""
    if isinstance(func_descriptions, list):
        for func_description in func_descriptions:
            if func_description["name"] == name:
                return func_description
        return None
    return func_descriptions


def get_possible_answer_type(possible_answer: list[Any]) -> type | None:
    """The type of the first non-optional possible answer."""
    for answer in possible_answer:
        if answer != "":
            return type(answer)
    return None


def type_checker(
    param: str,
    value: Any,
    possible_answer: list[Any],
    expected_type_description: str,
    expected_type_converted: type,
    nested_type_converted: type | None,
) -> Result:
    """BFCL's one-level-deep type check, with its variable-instead-of-value allowance."""
    result: Result = {"valid": True, "error": [], "is_variable": False, "error_type": "type_error:simple"}
    is_variable = False
    possible_answer_type = get_possible_answer_type(possible_answer)
    if possible_answer_type is not None and possible_answer_type != expected_type_converted:
        is_variable = True

    if type(value) == expected_type_converted:  # noqa: E721 - BFCL compares exact types
        if nested_type_converted is None:
            result["is_variable"] = is_variable
            return result
        for possible_answer_item in possible_answer:
            flag = True
            if type(possible_answer_item) == list:  # noqa: E721
                items: Any = value
                for value_item in items:
                    checker_result = type_checker(
                        param,
                        value_item,
                        possible_answer_item,
                        str(nested_type_converted),
                        nested_type_converted,
                        None,
                    )
                    if not checker_result["valid"]:
                        flag = False
                        break
            if flag:
                return {"valid": True, "error": [], "is_variable": is_variable}
        result["valid"] = False
        result["error"] = [
            f"Nested type checking failed for parameter {param!r}. Expected outer type "
            f"{expected_type_description} with inner type {nested_type_converted!s}. Parameter value: {value!r}."
        ]
        result["error_type"] = "type_error:nested"

    possible_answer_type = get_possible_answer_type(possible_answer)
    if possible_answer_type is not None and type(value) == possible_answer_type:  # noqa: E721
        result["is_variable"] = True
        return result

    result["valid"] = False
    result["error"].append(
        f"Incorrect type for parameter {param!r}. Expected type {expected_type_description}, "
        f"got {type(value).__name__}. Parameter value: {value!r}."
    )
    result["error_type"] = "type_error:simple"
    return result


def standardize_string(input_string: str) -> str:
    """Drop spaces and ``,./-_*^``, lowercase, and turn single quotes into double ones."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", input_string).lower().replace("'", '"')


def string_checker(param: str, model_output: str, possible_answer: list[Any]) -> Result:
    """A string matches one of the possible answers after standardization."""
    standardized = [standardize_string(a) for a in possible_answer if type(a) == str]  # noqa: E721
    if standardize_string(model_output) not in standardized:
        return {
            "valid": False,
            "error": [
                f"Invalid value for parameter {param!r}: {model_output!r}. "
                f"Expected one of {possible_answer}. Case insensitive."
            ],
            "error_type": "value_error:string",
        }
    return {"valid": True, "error": []}


def list_checker(param: str, model_output: list[Any], possible_answer: list[Any]) -> Result:
    """A list matches one of the possible lists, string items standardized."""
    output = [standardize_string(v) if type(v) == str else v for v in model_output]  # noqa: E721
    standardized = [
        [standardize_string(item) if type(item) == str else item for item in answer]  # noqa: E721
        for answer in possible_answer
    ]
    if output not in standardized:
        return {
            "valid": False,
            "error": [f"Invalid value for parameter {param!r}: {model_output!r}. Expected one of {possible_answer}."],
            "error_type": "value_error:list/tuple",
        }
    return {"valid": True, "error": []}


def dict_checker(param: str, model_output: dict[str, Any], possible_answers: list[Any]) -> Result:
    """A flat dict matches one of the possible dicts (keys, standardized values, optional keys)."""
    result: Result = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
    for possible_answer in possible_answers:
        if possible_answer == "":
            continue
        result = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
        flag = True
        for key, value in model_output.items():
            if key not in possible_answer:
                result["error"].append(f"Unexpected dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
            standardize_value = standardize_string(value) if type(value) == str else value  # noqa: E721
            standardized = [
                standardize_string(a) if type(a) == str else a for a in possible_answer[key]  # noqa: E721
            ]
            if standardize_value not in standardized:
                result["error"].append(
                    f"Invalid value for parameter {key!r}: {value!r}. Expected one of {standardized}."
                )
                result["error_type"] = "value_error:dict_value"
                flag = False
                break
        for key, value in possible_answer.items():
            if key not in model_output and "" not in value:
                result["error"].append(f"Missing dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def list_dict_checker(param: str, model_output: list[Any], possible_answers: list[Any]) -> Result:
    """A list of dicts matches one possible list, dict by dict, in order."""
    result: Result = {"valid": False, "error": [], "error_type": "list_dict_checker:unclear"}
    for answer in possible_answers:
        flag = True
        if len(model_output) != len(answer):
            result = {
                "valid": False,
                "error": ["Wrong number of dictionaries in the list."],
                "error_type": "value_error:list_dict_count",
            }
            continue
        for dict_index, item in enumerate(model_output):
            result = dict_checker(param, item, [answer[dict_index]])
            if not result["valid"]:
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def check_param_value(
    param: str, value: Any, allowed: list[Any], converted: type, nested: type | None, is_variable: bool
) -> Result | None:
    """The value checks after the type check; ``None`` when the value passes."""
    if not is_variable:
        if converted == dict:
            result = dict_checker(param, value, allowed)
            return None if result["valid"] else result
        if converted == list and nested == dict:
            result = list_dict_checker(param, value, allowed)
            return None if result["valid"] else result
        if converted == str:
            result = string_checker(param, value, allowed)
            return None if result["valid"] else result
        if converted == list:
            result = list_checker(param, value, allowed)
            return None if result["valid"] else result
    if value not in allowed:
        return {
            "valid": False,
            "error": [f"Invalid value for parameter {param!r}: {value!r}. Expected one of {allowed}."],
            "error_type": "value_error:others",
        }
    return None
