"""τ²'s `calculate` tool (retail and airline have the same one), without `eval`.

τ² checks the expression's characters (digits, `+ - * / ( ) .` and spaces) and hands it to
Python's `eval`. This walks the parsed expression instead and gives what `eval` gives: the same
values, the same syntax errors (compiled as "<string>", leading blanks skipped as `eval` skips
them), the same Python errors (`division by zero`, ...). One difference, on purpose: a power of
integers above a million bits is refused with the error τ² would end on (`float()` of such an int),
where τ² would first spend minutes computing `9**9**9`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

_ALLOWED = frozenset("0123456789+-*/(). ")
_MAX_POWER_BITS = 1_000_000
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def calculate(expression: str) -> str:
    """The expression's value rounded to 2 decimals, as text; Python's exception otherwise."""
    if not all(char in _ALLOWED for char in expression):
        raise ValueError("Invalid characters in expression")
    tree = compile(expression.lstrip(" \t"), "<string>", "eval", ast.PyCF_ONLY_AST)
    return str(round(float(_value(tree.body)), 2))


def _value(node: ast.AST) -> Any:
    """What Python computes for the node; only what the allowed characters can spell."""
    if isinstance(node, ast.Constant):
        return node.value  # a number, or `...`
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and _huge_power(left, right):
            raise OverflowError("int too large to convert to float")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Tuple) and not node.elts:
        return ()  # "()"
    if isinstance(node, ast.Call) and not node.keywords:
        # "(2)(3)" parses as a call: Python evaluates both sides, then a number is not callable.
        callee = _value(node.func)
        for arg in node.args:
            _value(arg)
        raise TypeError(f"'{type(callee).__name__}' object is not callable")
    raise ValueError("Invalid expression")  # "(1)(*2)" and the like: nothing τ² would answer


def _huge_power(base: Any, exponent: Any) -> bool:
    if not (isinstance(base, int) and isinstance(exponent, int)):
        return False  # a float power overflows at once, as in Python
    return abs(base) > 1 and exponent > 0 and exponent * base.bit_length() > _MAX_POWER_BITS
