"""A faithful port of BFCL's AST checker (Python language), and its relevance rule.

The official checker (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``) cannot be
imported cleanly: its module imports pull in tree-sitter, every provider SDK and the
model registry. This port keeps its rules exactly, messages and error types included,
for the Python categories; ``tests/test_eval_checker.py`` runs both on the same
samples, with the official one's heavy imports stubbed in that test only.

Model names are taken as "keep dots in function names" (BFCL's ``underscore_to_dot``
off): the runtime offers the BFCL names verbatim, so calls come back with them.

Decoded output, as BFCL decodes it: ``[{func_name: {param: value}}, ...]``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "ast_checker",
    "check_case",
    "is_empty_output",
    "is_function_calling_format_output",
    "relevance_checker",
    "standardize_string",
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


def ast_checker(
    func_description: list[dict[str, Any]],
    model_output: list[dict[str, Any]],
    possible_answer: list[dict[str, Any]],
    test_category: str,
) -> Result:
    """BFCL's ``ast_checker`` for Python: dispatch on the category name as BFCL does."""
    if "parallel" in test_category:
        return parallel_function_checker_no_order(func_description, model_output, possible_answer)
    if "multiple" in test_category:
        return multiple_function_checker(func_description, model_output, possible_answer)
    if len(model_output) != 1:
        return {
            "valid": False,
            "error": ["Wrong number of functions."],
            "error_type": "simple_function_checker:wrong_count",
        }
    return simple_function_checker(func_description[0], model_output[0], possible_answer[0])


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


def _check_param_value(
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


def simple_function_checker(
    func_description: dict[str, Any], model_output: dict[str, Any], possible_answer: dict[str, Any]
) -> Result:
    """One call against one function's possible answer (BFCL's rules, Python types)."""
    answer: dict[str, list[Any]] = list(possible_answer.values())[0]
    func_name = func_description["name"]
    param_details = func_description["parameters"]["properties"]
    required_params = func_description["parameters"]["required"]
    result: Result = {"valid": True, "error": [], "error_type": "simple_function_checker:unclear"}

    if func_name not in model_output:
        result["valid"] = False
        result["error"].append(f"Function name {func_name!r} not found in model output.")
        result["error_type"] = "simple_function_checker:wrong_func_name"
        return result
    model_params = model_output[func_name]

    for param in required_params:
        if param not in model_params:
            result["valid"] = False
            result["error"].append(f"Missing required parameter: {param!r}.")
            result["error_type"] = "simple_function_checker:missing_required"
            return result

    for param, value in model_params.items():
        if param not in param_details or param not in answer:
            result["valid"] = False
            result["error"].append(f"Unexpected parameter: {param!r}.")
            result["error_type"] = "simple_function_checker:unexpected_param"
            return result
        expected = param_details[param]["type"]
        converted = PYTHON_TYPE_MAPPING[expected]
        nested: type | None = None
        if expected in PYTHON_NESTED_TYPE_CHECK_LIST:
            nested = PYTHON_TYPE_MAPPING[param_details[param]["items"]["type"]]
        if expected == "tuple" and type(value) == tuple:  # noqa: E721
            value = list(value)
        if expected == "float" and type(value) == int:  # noqa: E721 - Python's int -> float allowance
            value = float(value)
        type_result = type_checker(param, value, answer[param], expected, converted, nested)
        if not type_result["valid"]:
            return type_result
        failure = _check_param_value(param, value, answer[param], converted, nested, type_result["is_variable"])
        if failure is not None:
            return failure

    for param in answer:
        if param not in model_params and "" not in answer[param]:
            result["valid"] = False
            result["error"].append(f"Optional parameter {param!r} not provided and not marked as optional.")
            result["error_type"] = "simple_function_checker:missing_optional"
            return result
    return result


def parallel_function_checker_no_order(
    func_descriptions: list[dict[str, Any]], model_output: list[dict[str, Any]], possible_answers: list[dict[str, Any]]
) -> Result:
    """Every expected call matches a distinct model call, in any order."""
    if len(model_output) != len(possible_answers):
        return {
            "valid": False,
            "error": ["Wrong number of functions."],
            "error_type": "parallel_function_checker_no_order:wrong_count",
        }
    matched: list[int] = []
    result: Result = {"valid": True, "error": []}
    for i, expected in enumerate(possible_answers):
        description = find_description(func_descriptions, list(expected.keys())[0])
        errors: list[Any] = []
        for index, call in enumerate(model_output):
            if index in matched:
                continue
            result = simple_function_checker(description, call, expected)
            if result["valid"]:
                matched.append(index)
                break
            errors.append(
                {
                    f"Model Result Index {index}": {
                        "sub_error": result["error"],
                        "sub_error_type": result["error_type"],
                        "model_output_item": call,
                        "possible_answer_item": expected,
                    }
                }
            )
        if not result["valid"]:
            considered = [k for k in range(len(model_output)) if k not in matched]
            errors.insert(
                0,
                f"Could not find a matching function among index {considered} of model output "
                f"for index {i} of possible answers.",
            )
            return {
                "valid": False,
                "error": errors,
                "error_type": "parallel_function_checker_no_order:cannot_find_match",
            }
    return {"valid": True, "error": []}


def multiple_function_checker(
    func_descriptions: list[dict[str, Any]], model_output: list[dict[str, Any]], possible_answers: list[dict[str, Any]]
) -> Result:
    """One call expected among several offered functions."""
    if len(model_output) != len(possible_answers):
        return {
            "valid": False,
            "error": ["Wrong number of functions."],
            "error_type": "multiple_function_checker:wrong_count",
        }
    expected_name = list(possible_answers[0].keys())[0]
    description = find_description(func_descriptions, expected_name)
    return simple_function_checker(description, model_output[0], possible_answers[0])


def is_function_calling_format_output(decoded_output: Any) -> bool:
    """``[{name: {param: value}}, ...]`` (an empty list counts as the right format)."""
    if type(decoded_output) != list:  # noqa: E721
        return False
    for item in decoded_output:
        if type(item) != dict or len(item) != 1:  # noqa: E721
            return False
        if type(list(item.values())[0]) != dict:  # noqa: E721
            return False
    return True


def is_empty_output(decoded_output: Any) -> bool:
    """BFCL's relevance patch: ``[]``, ``[{}]`` and non-call shapes hold no call."""
    if not is_function_calling_format_output(decoded_output):
        return True
    return len(decoded_output) == 0 or (len(decoded_output) == 1 and len(decoded_output[0]) == 0)


def relevance_checker(decoded_output: Any, test_category: str) -> Result:
    """Irrelevance: right when no call was made; relevance: right when one was."""
    contains_call = decoded_output is not None and not is_empty_output(decoded_output)
    success = not contains_call if "irrelevance" in test_category else contains_call
    if success:
        return {"valid": True, "error": []}
    if "irrelevance" in test_category:
        return {
            "valid": False,
            "error": ["Valid syntax. Successfully decode AST when it should not."],
            "error_type": "irrelevance_error:decoder_success",
        }
    return {
        "valid": False,
        "error": ["Invalid syntax. Failed to decode AST when it should have."],
        "error_type": "relevance_error:decoder_failed",
    }


def check_case(
    category: str,
    functions: list[dict[str, Any]],
    ground_truth: list[dict[str, Any]] | None,
    decoded_output: Any,
) -> Result:
    """Score one case as BFCL's eval runner does; ``decoded_output=None`` means "did not decode"."""
    if ground_truth is None:
        return relevance_checker(decoded_output, category)
    if decoded_output is None:
        return {
            "valid": False,
            "error": ["Invalid syntax. Failed to decode AST."],
            "error_type": "ast_decoder:decoder_failed",
        }
    if not is_function_calling_format_output(decoded_output):
        return {
            "valid": False,
            "error": ["Did not output in the specified format."],
            "error_type": "ast_decoder:decoder_wrong_output_format",
        }
    return ast_checker(functions, decoded_output, ground_truth, category)
