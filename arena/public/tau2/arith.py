"""τ²'s `calculate` tool: an arithmetic expression evaluated as Python, rounded to two decimals.

τ² checks that the expression holds only digits, `+ - * / ( ) .` and spaces, evaluates it with
Python's `eval` (no builtins), and answers `str(round(float(value), 2))`; whatever Python raises is
the agent's error. The port does the same and raises what Python raises, with one difference on
purpose: Python would spend minutes or hours on an integer power such as `9**9**9**9` (τ²'s server
stalls), so a power whose integer result would pass 2**1_000_000 raises the error its conversion
to float would end on (`OverflowError: int too large to convert to float`), at once.
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

ALLOWED_CHARS = "0123456789+-*/(). "
POWER_LIMIT_BITS = 1_000_000


class InvalidCharacters(ValueError):
    """The expression holds something other than digits, operators, parentheses and spaces."""


def calculate_text(expression: Any) -> str:
    """The value of `expression` as τ²'s `calculate` answers it; Python's exception otherwise."""
    # A non-string is refused as τ²'s check and `eval` refuse one (iterating it, then eval()).
    if not all(char in ALLOWED_CHARS for char in expression):
        raise InvalidCharacters("Invalid characters in expression")
    if not isinstance(expression, str):
        raise TypeError("eval() arg 1 must be a string, bytes or code object")
    text = expression.lstrip(" \t")  # as eval() strips a string before compiling it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "perhaps you missed a comma?" on `2(3)`
        code = compile(text, "<string>", "eval")  # the SyntaxError eval() would raise
    tree = ast.parse(text, mode="eval")
    if any(isinstance(node, ast.Pow) for node in ast.walk(tree)):
        value = _evaluate(tree.body)
    else:
        value = eval(code, {"__builtins__": None}, {})  # digits and operators only: checked above
    return str(round(float(value), 2))


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _evaluate(node: ast.expr) -> Any:
    """Python's evaluation of the nodes the allowed characters can make, refusing huge powers."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):  # only + and - are writable with the allowed characters
        value = _evaluate(node.operand)
        return operator.neg(value) if isinstance(node.op, ast.USub) else operator.pos(value)
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and _huge_power(left, right):
            raise OverflowError("int too large to convert to float")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(item) for item in node.elts)
    if isinstance(node, ast.Call):  # `2(3)`: Python evaluates callee and arguments, then refuses
        callee = _evaluate(node.func)
        for arg in node.args:
            _evaluate(arg.value if isinstance(arg, ast.Starred) else arg)
        raise TypeError(f"'{type(callee).__name__}' object is not callable")
    raise TypeError(f"unsupported expression: {ast.dump(node)}")


def _huge_power(base: Any, exponent: Any) -> bool:
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0:
        return False
    return abs(base) > 1 and exponent * math.log2(abs(base)) > POWER_LIMIT_BITS
