"""Calls on Python-object environments, written as Python call expressions: `cd(folder='docs')`.

This is the form benchmarks such as BFCL record trajectories in ("decoded" calls), and the form an
episode's tool call is turned into before it runs, so a live episode, a replay and a result file
from another harness all go through the same path. A call is never `eval`ed: the text is parsed
with `ast` and only a call of a known method with literal arguments (or nested calls of the same
kind) is carried out. Anything else comes back as an error result, as a failing `eval` would.

Results are text, the way the agent sees them: a string as it is, a dict as JSON (its `str` when
it is not JSON), anything else through `str`; an exception becomes `Error during execution: ...`.

Kept free of anyio and structlog: the sandbox worker imports it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from typing import Any

ERROR_PREFIX = "Error during execution: "
# Names a call may never have, whatever the backend defines: process and file-removal verbs that
# the benchmark harness refuses too, so a trajectory scores alike here and there.
FORBIDDEN = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})


class CallRefused(Exception):
    """A call that is not a plain method call with literal arguments."""


def call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """`name(k=v, ...)` with each value as a Python literal (JSON values round-trip exactly)."""
    return f"{name}({','.join(f'{key}={value!r}' for key, value in arguments.items())})"


def called_name(text: str) -> str:
    """The name before the first parenthesis (what the forbidden-name rule looks at)."""
    head = text.split("(", 1)[0]
    return head.rsplit(".", 1)[-1].strip()


def _value(node: ast.expr, methods: Mapping[str, Callable[..., Any]]) -> Any:
    if isinstance(node, ast.Call):
        return _invoke(node, methods)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise CallRefused(f"unsupported argument {ast.unparse(node)[:80]!r}") from exc


def _invoke(node: ast.Call, methods: Mapping[str, Callable[..., Any]]) -> Any:
    if not isinstance(node.func, ast.Name):
        raise CallRefused(f"unsupported call target {ast.unparse(node.func)[:80]!r}")
    name = node.func.id
    method = methods.get(name)
    if method is None:
        raise NameError(f"name '{name}' is not defined")
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise CallRefused("argument unpacking is not supported")
    args = [_value(a, methods) for a in node.args]
    kwargs = {str(k.arg): _value(k.value, methods) for k in node.keywords}
    return method(*args, **kwargs)


def as_text(value: Any) -> str:
    """A method's return value as the agent sees it."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def execute(text: str, methods: Mapping[str, Callable[..., Any]]) -> str:
    """Run one call expression against `methods` (name -> bound method); its result as text.

    Every failure is a result, never an exception: a syntax error, an unknown or forbidden name,
    a non-literal argument, or an exception the method raised.
    """
    try:
        name = called_name(text)
        if name in FORBIDDEN:
            raise PermissionError(f"Function call {name} is not allowed.")
        tree = ast.parse(text.strip(), mode="eval")
        if not isinstance(tree.body, ast.Call):
            raise CallRefused(f"not a call: {text[:80]!r}")
        return as_text(_invoke(tree.body, methods))
    except MemoryError:
        raise
    except Exception as exc:  # the backend's own errors are results the agent sees
        return f"{ERROR_PREFIX}{exc}"
