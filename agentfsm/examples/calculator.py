"""A calculator and a unit converter: the tool set of ``make demo``.

``agentfsm run --tools agentfsm.examples.calculator:TOOLS "What is 12.5 * 4 ..."``
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["TOOLS", "calculate", "convert_units"]

_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return float(_OPS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_eval(node.operand)))
    raise ValueError("only numbers and + - * / % ** are allowed")


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression such as "12.5 * 4"."""
    if len(expression) > 200:
        raise ValueError("expression too long")
    return _eval(ast.parse(expression.replace("^", "**"), mode="eval"))


_TO_METRES = {"km": 1000.0, "m": 1.0, "mi": 1609.344, "ft": 0.3048}
_ALIASES = {
    "kilometres": "km", "kilometers": "km", "kilometre": "km", "kilometer": "km",
    "metres": "m", "meters": "m", "metre": "m", "meter": "m",
    "miles": "mi", "mile": "mi", "feet": "ft", "foot": "ft",
}


def convert_units(value: float, from_unit: Literal["km", "m", "mi", "ft"], to_unit: Literal["km", "m", "mi", "ft"]) -> float:
    """Convert a length between km, m, mi (miles) and ft."""
    src = _ALIASES.get(str(from_unit).lower(), str(from_unit).lower())
    dst = _ALIASES.get(str(to_unit).lower(), str(to_unit).lower())
    if src not in _TO_METRES or dst not in _TO_METRES:
        raise ValueError(f"unknown unit; use one of {sorted(_TO_METRES)}")
    return round(float(value) * _TO_METRES[src] / _TO_METRES[dst], 4)


TOOLS = [calculate, convert_units]
