"""BFCL's own prompt mode: its default system prompt and its AST decoder, ported.

The baseline row of an eval runs each case the way BFCL runs a prompting model:
this system prompt, plain generation on the same backend (no agentfsm contract, no
guards, no constrained decoding), and BFCL's ``default_decode_ast_prompting`` on the
reply. BFCL's versions live in ``bfcl_eval/model_handler/utils.py``, whose imports need
tree-sitter and the provider SDKs, so they are ported here;
``tests/test_eval_baseline.py`` compares both on samples with those imports stubbed.

One deliberate difference: BFCL ``eval``s a binary operation found in an argument
(``a=2*3``); here only arithmetic on literals is evaluated, with bounded sizes, and
anything else fails to decode, as BFCL's ``eval`` would on a name it does not know.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from typing import Any

__all__ = [
    "BFCL_SYSTEM_PROMPT_TEMPLATE",
    "bfcl_prompt_messages",
    "bfcl_system_prompt",
    "decode_ast_prompting",
    "resolve_ast_by_type",
    "resolve_ast_call",
]

_OUTPUT_FORMAT = "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
_PERSONA = "You are an expert in composing functions."
_TASK = (
    "You are given a question and a set of possible functions. Based on the question, you will need to make "
    "one or more function/tool calls to achieve the purpose. If none of the functions can be used, point it out. "
    "If the given question lacks the parameters required by the function, also point it out."
)
_TOOL_CALL_NO_TAG = (
    "You should only return the function calls in your response.\n\nIf you decide to invoke any of the "
    "function(s), you MUST put it in the format of {output_format}. {param_types} You SHOULD NOT include any "
    "other text in the response."
)
_MULTITURN = (
    "At each turn, you should try your best to complete the tasks requested by the user within the current "
    "turn. Continue to output functions to call until you have fulfilled the user's request to the best of your "
    "ability. Once you have no more functions to call, the system will consider the current turn complete and "
    "proceed to the next turn or task."
)
_AVAILABLE = "Here is a list of functions in {format} format that you can invoke.\n{functions}\n"

#: BFCL's plaintext template, default configuration
#: ``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic``
BFCL_SYSTEM_PROMPT_TEMPLATE = "{persona}{task}\n\n{tool_call_format}\n\n{multiturn_behavior}\n\n{available_tools}"

_MAX_NUMBER = 10**12
_MAX_STR = 10_000


def bfcl_system_prompt(functions: list[dict[str, Any]]) -> str:
    """BFCL's default system prompt for prompting models, over BFCL function docs."""
    return BFCL_SYSTEM_PROMPT_TEMPLATE.format(
        persona=_PERSONA,
        task=_TASK,
        tool_call_format=_TOOL_CALL_NO_TAG.format(output_format=_OUTPUT_FORMAT, param_types=""),
        multiturn_behavior=_MULTITURN,
        available_tools=_AVAILABLE.format(format="json", functions=json.dumps(functions, indent=4)),
    )


def bfcl_prompt_messages(messages: list[dict[str, str]], functions: list[dict[str, Any]]) -> list[dict[str, str]]:
    """BFCL's ``system_prompt_pre_processing_chat_model``: prepend to or insert the system prompt."""
    out = [dict(m) for m in messages]
    system = bfcl_system_prompt(functions)
    if out and out[0]["role"] == "system":
        out[0]["content"] = system + "\n\n" + out[0]["content"]
    else:
        out.insert(0, {"role": "system", "content": system})
    return out


def decode_ast_prompting(result: str) -> list[dict[str, Any]]:
    """BFCL's ``default_decode_ast_prompting`` (Python): raises on a reply that does not decode."""
    result = result.strip("`\n ")
    if not result.startswith("["):
        result = "[" + result
    if not result.endswith("]"):
        result = result + "]"
    cleaned = result.strip().strip("'")
    parsed = ast.parse(cleaned, mode="eval")
    if isinstance(parsed.body, ast.Call):
        return [resolve_ast_call(parsed.body)]
    elts = getattr(parsed.body, "elts", None)
    if elts is None:
        raise ValueError(f"not a list of calls: {type(parsed.body).__name__}")
    extracted: list[dict[str, Any]] = []
    for elem in elts:
        if not isinstance(elem, ast.Call):
            raise ValueError(f"not a call: {type(elem).__name__}")
        extracted.append(resolve_ast_call(elem))
    return extracted


def resolve_ast_call(elem: ast.Call) -> dict[str, Any]:
    """``mod.f(a=1)`` -> ``{"mod.f": {"a": 1}}`` (positional arguments are ignored, as in BFCL)."""
    parts: list[str] = []
    func: ast.expr = elem.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    name = ".".join(reversed(parts))
    args: dict[str, Any] = {}
    for kw in elem.keywords:
        args[str(kw.arg)] = resolve_ast_by_type(kw.value)
    return {name: args}


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _literal_arith(node: ast.expr) -> Any:
    """Evaluate arithmetic on literals only, with bounded results (stands in for BFCL's ``eval``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _literal_arith(node.operand)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _literal_arith(node.left), _literal_arith(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > _MAX_NUMBER):
            raise ValueError("exponent too large")
        if isinstance(node.op, ast.Mult) and (isinstance(left, str) or isinstance(right, str)):
            count = right if isinstance(left, str) else left
            text = left if isinstance(left, str) else right
            if not isinstance(count, int) or len(text) * max(count, 0) > _MAX_STR:
                raise ValueError("string repetition too large")
        return _BINOPS[type(node.op)](left, right)
    raise ValueError(f"cannot evaluate {type(node).__name__} in an argument")


def resolve_ast_by_type(value: ast.expr) -> Any:
    """An argument's AST node as a Python value, by BFCL's rules."""
    if isinstance(value, ast.Constant):
        return "..." if value.value is Ellipsis else value.value
    if isinstance(value, ast.UnaryOp):
        # BFCL negates the operand's value whatever the operator (``+5`` gives -5).
        if not isinstance(value.operand, ast.Constant):
            raise ValueError("unary operator on a non-literal")
        return -value.operand.value  # type: ignore[operator]
    if isinstance(value, ast.List):
        return [resolve_ast_by_type(v) for v in value.elts]
    if isinstance(value, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(value.keys, value.values, strict=True):
            if k is None:
                raise ValueError("dict unpacking in an argument")
            out[resolve_ast_by_type(k)] = resolve_ast_by_type(v)
        return out
    if isinstance(value, ast.BinOp):
        return _literal_arith(value)
    if isinstance(value, ast.Name):
        return value.id
    if isinstance(value, ast.Call):
        return ast.unparse(value) if not value.keywords else resolve_ast_call(value)
    if isinstance(value, ast.Tuple):
        return tuple(resolve_ast_by_type(v) for v in value.elts)
    if isinstance(value, ast.Subscript):
        return ast.unparse(value.value) + "[" + ast.unparse(value.slice) + "]"
    raise ValueError(f"Unsupported AST type: {type(value)}")
