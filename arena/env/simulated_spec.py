"""Validation of a simulated environment's `tools.json` (TRUSTEE-style: no state, no code).

`tools.json` holds JSON-schema tool definitions in the form an MCP server's `tools/list` returns
(`{"tools": [...]}` or a bare list of `{name, description, inputSchema, annotations}`); OpenAI
`{"type": "function", "function": {...}}` entries and `parameters` instead of `inputSchema` are
accepted too, so any catalogue can be dropped in. The simulator that plays these tools lives in
`simulate`; this module only turns the file into `ToolSpec`s or reports what is wrong with it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from arena.env.errors import Problems
from arena.env.spec import TOOL_NAME_RE
from arena.types import ToolSpec


def _line_of_name(text: str, name: str) -> int | None:
    pattern = re.compile(rf'"name"\s*:\s*"{re.escape(name)}"')
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.search(line):
            return number
    return None


def _unwrap(entry: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI `{"type": "function", "function": {...}}` entry as a flat tool object."""
    if entry.get("type") == "function" and isinstance(entry.get("function"), dict):
        return entry["function"]
    return entry


def load_simulated_tools(folder: Path, problems: Problems) -> tuple[list[ToolSpec], list[str]] | None:
    """Read `tools.json`: the tool specs and the names of tools that change state.

    A tool counts as writing unless its MCP annotations say `readOnlyHint: true` (MCP's default).
    Returns None when the file is unusable; every fault is recorded in `problems`.
    """
    path = folder / "tools.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.add(path, "missing file (a simulated environment lists its tools here)")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(path, f"cannot read: {exc}")
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.add(path, f"invalid JSON: {exc.msg}", line=exc.lineno)
        return None
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        problems.add(path, 'expected a list of tools or {"tools": [...]}')
        return None
    if not data:
        problems.add(path, "no tools defined")
        return None

    specs: list[ToolSpec] = []
    writes: list[str] = []
    seen: dict[str, int] = {}
    count_before = len(problems.items)
    for i, raw in enumerate(data):
        where = f"tools[{i}]"
        if not isinstance(raw, dict):
            problems.add(path, "each tool must be a JSON object", field=where)
            continue
        entry = _unwrap(raw)
        name = entry.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.fullmatch(name):
            problems.add(path, f"tool name {name!r} must match {TOOL_NAME_RE.pattern}", field=f"{where}.name")
            continue
        line = _line_of_name(text, name)
        if name in seen:
            problems.add(
                path,
                f"duplicate tool name {name!r} (first defined as tools[{seen[name]}])",
                line=line,
                field=f"{where}.name",
            )
            continue
        seen[name] = i
        description = entry.get("description")
        if not isinstance(description, str) or not description.strip():
            problems.add(
                path, f"tool {name!r} needs a non-empty description", line=line, field=f"{where}.description"
            )
        schema_key = "inputSchema" if "inputSchema" in entry else "parameters"
        schema = entry.get(schema_key, {"type": "object", "properties": {}})
        if not _check_schema(schema, path, problems, line=line, field=f"{where}.{schema_key}", tool=name):
            continue
        annotations = entry.get("annotations") or {}
        if not isinstance(annotations, dict):
            problems.add(path, "annotations must be an object", line=line, field=f"{where}.annotations")
            annotations = {}
        if annotations.get("readOnlyHint") is not True:
            writes.append(name)
        specs.append(ToolSpec(name=name, description=(description or "").strip(), parameters=schema))
    if len(problems.items) > count_before:
        return None
    return specs, writes


def _check_schema(
    schema: Any, path: Path, problems: Problems, *, line: int | None, field: str, tool: str
) -> bool:
    """An argument schema must be a valid JSON schema of an object whose `required` names exist."""
    if not isinstance(schema, dict):
        problems.add(path, f"tool {tool!r}: the argument schema must be an object", line=line, field=field)
        return False
    ok = True
    if schema.get("type") != "object":
        problems.add(
            path, f'tool {tool!r}: the argument schema needs "type": "object"', line=line, field=field
        )
        ok = False
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        problems.add(
            path, f"tool {tool!r}: properties must be an object", line=line, field=f"{field}.properties"
        )
        return False
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.add(
            path, f"tool {tool!r}: required must be a list of names", line=line, field=f"{field}.required"
        )
        ok = False
    else:
        for r in required:
            if r not in props:
                problems.add(
                    path,
                    f"tool {tool!r}: required parameter {r!r} is not in properties",
                    line=line,
                    field=f"{field}.required",
                )
                ok = False
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        loc = ".".join(str(p) for p in exc.path)
        problems.add(
            path,
            f"tool {tool!r}: invalid JSON schema: {exc.message}",
            line=line,
            field=f"{field}.{loc}" if loc else field,
        )
        ok = False
    return ok
