"""Example tools: ``TOOLS`` is the tool set of ``make demo``; ``CALCULATOR`` the older pair.

``agentfsm run --tools agentfsm.testing.example_tools:TOOLS "Multiply 12.5 by 4 ..."``

The demo's tools take typed numbers (``multiply(a, b)``, ``convert_km_to_miles(km)``): a
small model fills a number slot far more reliably than it writes an expression string.
``calculate`` and ``convert_units`` stay for tests and the batch fixtures.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["CALCULATOR", "TOOLS", "calculate", "convert_km_to_miles", "convert_units", "multiply"]

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


def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a times b."""
    return float(a) * float(b)


_MILES_PER_KM = 0.621371


def convert_km_to_miles(km: float) -> float:
    """Convert a distance in kilometres to miles (rounded to 2 decimals)."""
    return round(float(km) * _MILES_PER_KM, 2)


#: the demo's tools (``make demo``)
TOOLS = [multiply, convert_km_to_miles]
#: an expression calculator and a unit converter
CALCULATOR = [calculate, convert_units]
