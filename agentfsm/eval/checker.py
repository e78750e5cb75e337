"""A faithful port of BFCL's AST checker, and its relevance rule.

The official checker (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``) cannot be
imported cleanly: its module imports pull in tree-sitter, every provider SDK and the
model registry. This port keeps its rules exactly, messages and error types included,
for the Python categories (Java and JavaScript values go through BFCL's own type
converters first: :mod:`~agentfsm.eval.languages`); ``tests/test_eval_checker.py`` runs both on the same
samples, with the official one's heavy imports stubbed in that test only.

Model names are taken as "keep dots in function names" (BFCL's ``underscore_to_dot``
off): the runtime offers the BFCL names verbatim, so calls come back with them.

Decoded output, as BFCL decodes it: ``[{func_name: {param: value}}, ...]``. The value
checks live in :mod:`agentfsm.eval._values`.
"""

from __future__ import annotations

from typing import Any

from agentfsm.eval._values import (
    PYTHON_NESTED_TYPE_CHECK_LIST,
    PYTHON_TYPE_MAPPING,
    Result,
    check_param_value,
    find_description,
    standardize_string,
    type_checker,
)
from agentfsm.eval.languages import convert_param, language_of

__all__ = [
    "ast_checker",
    "check_case",
    "is_empty_output",
    "is_function_calling_format_output",
    "relevance_checker",
    "standardize_string",
]


def ast_checker(
    func_description: list[dict[str, Any]],
    model_output: list[dict[str, Any]],
    possible_answer: list[dict[str, Any]],
    test_category: str,
) -> Result:
    """BFCL's ``ast_checker``: dispatch on the category name as BFCL does."""
    language = language_of(test_category)
    if "parallel" in test_category:
        return parallel_function_checker_no_order(func_description, model_output, possible_answer, language)
    if "multiple" in test_category:
        return multiple_function_checker(func_description, model_output, possible_answer, language)
    if len(model_output) != 1:
        return {
            "valid": False,
            "error": ["Wrong number of functions."],
            "error_type": "simple_function_checker:wrong_count",
        }
    return simple_function_checker(func_description[0], model_output[0], possible_answer[0], language)


def simple_function_checker(
    func_description: dict[str, Any],
    model_output: dict[str, Any],
    possible_answer: dict[str, Any],
    language: str = "python",
) -> Result:
    """One call against one function's possible answer (BFCL's rules, ``language``'s types)."""
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
        nested: type | None = None
        if language != "python":
            typed = convert_param(language, param, value, param_details[param])
            if isinstance(typed, dict):
                return typed
            value, converted, nested = typed
        else:
            converted = PYTHON_TYPE_MAPPING[expected]
            if expected in PYTHON_NESTED_TYPE_CHECK_LIST:
                nested = PYTHON_TYPE_MAPPING[param_details[param]["items"]["type"]]
        if expected == "tuple" and type(value) == tuple:  # noqa: E721
            value = list(value)
        if language == "python" and expected == "float" and type(value) == int:  # noqa: E721 - Python's allowance
            value = float(value)
        type_result = type_checker(param, value, answer[param], expected, converted, nested)
        if not type_result["valid"]:
            return type_result
        failure = check_param_value(param, value, answer[param], converted, nested, type_result["is_variable"])
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
    func_descriptions: list[dict[str, Any]],
    model_output: list[dict[str, Any]],
    possible_answers: list[dict[str, Any]],
    language: str = "python",
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
            result = simple_function_checker(description, call, expected, language)
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
    func_descriptions: list[dict[str, Any]],
    model_output: list[dict[str, Any]],
    possible_answers: list[dict[str, Any]],
    language: str = "python",
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
    return simple_function_checker(description, model_output[0], possible_answers[0], language)


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
