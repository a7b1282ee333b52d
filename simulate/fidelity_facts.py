"""The facts tool fidelity looks for (`simulate.fidelity`): the values a task's checks read, found in results.

A task's facts (`check_values`) are the values its checks read: answer-check values, the literals
of SQL and python checks (`sql_literals`, `python_literals`), the arguments of action checks and
reference calls (0, 1 and one-character strings left out). A tool result shows a fact when
`contains_value` finds it in the result as JSON (`facts_in`).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from arena.tasks.model import ActionCheck, AnswerCheck, PythonCheck, SqlCheck, Task
from arena.tasks.normalize import contains_value, normalize_text

_SQL_STRING = re.compile(r"'((?:[^']|'')*)'")
_SQL_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_SQL_QUERY = re.compile(r"^\s*(select|with|insert|update|delete)\b", re.IGNORECASE)


def _keep(value: Any) -> str | None:
    """A value as a fact string, or None for what is no fact (booleans, 0/1, one character)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return None if value in (0, 1) else (str(int(value)) if float(value).is_integer() else str(value))
    if isinstance(value, str):
        text = value.strip()
        return text if len(text) >= 2 else None
    return None


def _scalars(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for item in value.values() for v in _scalars(item)]
    if isinstance(value, list):
        return [v for item in value for v in _scalars(item)]
    return [value]


def sql_literals(sql: str) -> list[Any]:
    """The string and number literals of a query."""
    strings = [m.replace("''", "'") for m in _SQL_STRING.findall(sql)]
    rest = _SQL_STRING.sub(" ", sql)
    numbers = [float(n) if "." in n else int(n) for n in _SQL_NUMBER.findall(rest)]
    return [*strings, *numbers]


def python_literals(code: str) -> list[Any]:
    """The constants of a python check (an SQL string gives its literals instead)."""
    out: list[Any] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and _SQL_QUERY.match(node.value):
                out.extend(sql_literals(node.value))
            else:
                out.append(node.value)
    return out


def check_values(task: Task) -> list[str]:
    """The facts a task's checks read (see the module docstring), in first-seen order, unique."""
    raw: list[Any] = []
    for check in task.checks:
        if isinstance(check, AnswerCheck):
            raw.extend(v for group in check.expected_groups() for v in group)
        elif isinstance(check, SqlCheck):
            raw.extend(sql_literals(check.sql))
        elif isinstance(check, PythonCheck):
            raw.extend(python_literals(check.code))
        elif isinstance(check, ActionCheck):
            raw.extend(v for call in check.calls for v in _scalars(call.args))
    for call in task.reference:
        raw.extend(_scalars(call.arguments))
    seen: dict[str, str] = {}
    for value in raw:
        fact = _keep(value)
        if fact is not None:
            seen.setdefault(normalize_text(fact), fact)
    return list(seen.values())


def result_text(output: Any) -> str:
    """A tool result as the text facts are looked up in."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)


def facts_in(output: Any, values: list[str]) -> list[str]:
    """The values that appear in a tool result."""
    text = result_text(output)
    return [v for v in values if contains_value(text, v)]
