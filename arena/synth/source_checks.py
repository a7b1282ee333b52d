"""Static checks of a model-written `tools.py`, before it is ever imported.

`ast` only: imports from an allow-list, no calls that reach files, code or attributes by name, no
clock (time comes from the handle's `db.now()`), no dunder attributes, and at least one `@tool`
function. The sandbox is the boundary; these checks give the writing model a precise error to
fix instead of a failed import.
"""

from __future__ import annotations

import ast

ALLOWED_IMPORTS = {
    "__future__",
    "arena.env",
    "typing",
    "pydantic",
    "re",
    "json",
    "math",
    "decimal",
    "collections",
}
FORBIDDEN_CALLS = {"open", "eval", "exec", "compile", "__import__", "input", "globals", "setattr", "getattr"}


def check_tools_source(source: str) -> list[str]:
    """Static problems of a model-written tools.py (empty when it passes)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"syntax error: {exc.msg} (line {exc.lineno})"]
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in ALLOWED_IMPORTS:
                    problems.append(f"line {node.lineno}: import {alias.name} is not allowed")
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "") not in ALLOWED_IMPORTS:
                problems.append(f"line {node.lineno}: import from {node.module} is not allowed")
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS
        ):
            problems.append(f"line {node.lineno}: {node.func.id}() is not allowed")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("now", "today", "utcnow")
            and not (isinstance(node.value, ast.Name) and node.value.id == "db")
        ):
            problems.append(f"line {node.lineno}: take the time from db.now(), not .{node.attr}()")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr != "__name__":
            problems.append(f"line {node.lineno}: dunder attribute {node.attr} is not allowed")
    if not any(isinstance(n, ast.FunctionDef) and n.decorator_list for n in tree.body):
        problems.append("defines no @tool functions")
    return problems
