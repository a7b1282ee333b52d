"""Importers: any tool catalogue becomes a simulated environment folder (env.toml + tools.json).

Two sources:

- `tools_from_json(data)`: an MCP `tools/list` result (`{"tools": [...]}` with `inputSchema`), an
  OpenAI function list (`[{"type": "function", "function": {...}}]`, or `{"functions": [...]}` /
  bare `{name, description, parameters}` objects);
- `tools_from_mcp(command, args)`: a live MCP server started over stdio with the real `mcp`
  client, every page of its `tools/list`.

`write_simulated_env` runs the quality filter (`simulate.simulators.quality`) plus structural
checks (tool name, JSON schema validity), writes only the kept tools, and loads the result with
the arena loader to be sure it is a working environment. Dropped tools come back with reasons.

Parameter descriptions a source left out are written before the filter runs
(`simulate.param_descriptions`); each written one is listed on its tool in tools.json under
`x-arena-generated` (`[{"parameter": ..., "by": "helper" | "fallback", "model": ...}]`), a key the
arena loader ignores and `arena envs show` reads back.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import structlog
from jsonschema import SchemaError
from jsonschema.validators import validator_for
from pydantic import BaseModel, Field

from arena.env.errors import EnvLoadError
from arena.env.loader import load_environment
from arena.env.spec import ENV_NAME_RE, TOOL_NAME_RE
from arena.types import ToolSpec
from simulate.simulators.quality import ToolQuality, assess_tool

log = structlog.get_logger(__name__)
# ARENA_* variables that carry secrets: a server started for import (often `arena mcp`, but any
# command) does not need them to list its tools.
_SECRET_VAR = re.compile(r"(TOKEN|API_KEY|PASSWORD|SECRET|DATABASE_URL)$")
_STDERR_LINES = 20  # of a failed server's stderr, quoted whole (its error is usually the last line)


class ToolImportError(ValueError):
    """The source cannot be imported at all (bad file, unreachable server, no usable tool)."""


GENERATED_KEY = "x-arena-generated"  # on a tool entry of tools.json: the descriptions Arena wrote


class GeneratedParam(BaseModel):
    """A parameter description that the source lacked and Arena wrote."""

    tool: str
    parameter: str
    text: str
    by: Literal["helper", "fallback"]  # the helper model, or the deterministic fallback
    model: str | None = None  # the helper's name (by == "helper")
    why: str | None = None  # why the fallback wrote it (by == "fallback")

    def mark(self) -> dict[str, str]:
        """The entry written under `x-arena-generated`."""
        out = {"parameter": self.parameter, "by": self.by}
        if self.model:
            out["model"] = self.model
        return out


class ImportedTool(BaseModel):
    """One tool as found in the source, before filtering."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] | None = None
    read_only: bool | None = None
    problem: str | None = None  # a structural fault found while reading it
    generated: list[GeneratedParam] = Field(default_factory=list)  # descriptions Arena wrote

    def spec(self) -> ToolSpec:
        """The tool as a `ToolSpec` (for the quality filter)."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.input_schema or {})

    def mcp(self) -> dict[str, Any]:
        """The MCP `tools/list` entry written to tools.json."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description.strip(),
            "inputSchema": self.input_schema,
        }
        if self.read_only is not None:
            out["annotations"] = {"readOnlyHint": self.read_only}
        if self.generated:
            out[GENERATED_KEY] = [g.mark() for g in self.generated]
        return out


class ImportReport(BaseModel):
    """What an import produced."""

    path: str
    env: str
    kept: list[str]
    dropped: list[ToolQuality]
    generated: list[GeneratedParam] = Field(default_factory=list)  # of the kept tools


def _entry(raw: Any, index: int) -> ImportedTool:
    if not isinstance(raw, dict):
        return ImportedTool(name=f"tools[{index}]", problem="not a JSON object")
    entry = (
        raw["function"] if raw.get("type") == "function" and isinstance(raw.get("function"), dict) else raw
    )
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return ImportedTool(name=f"tools[{index}]", problem="no name")
    description = entry.get("description") if isinstance(entry.get("description"), str) else ""
    schema = entry.get("inputSchema", entry.get("input_schema", entry.get("parameters")))
    if schema is None:
        schema = {"type": "object", "properties": {}}
    annotations = entry.get("annotations") if isinstance(entry.get("annotations"), dict) else {}
    read_only = annotations.get("readOnlyHint", annotations.get("read_only_hint"))
    tool = ImportedTool(
        name=name,
        description=description,
        input_schema=schema if isinstance(schema, dict) else None,
        read_only=read_only if isinstance(read_only, bool) else None,
    )
    if not TOOL_NAME_RE.fullmatch(name):
        tool.problem = f"name must match {TOOL_NAME_RE.pattern}"
    elif not isinstance(schema, dict):
        tool.problem = "input schema is not a JSON object"
    else:
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            tool.problem = f"invalid JSON schema: {exc.message[:160]}"
        else:
            required = schema.get("required", [])
            props = schema.get("properties", {})
            if schema.get("type") != "object":
                tool.problem = 'input schema needs "type": "object"'
            elif isinstance(required, list) and isinstance(props, dict) and set(required) - set(props):
                tool.problem = f"required parameters not in properties: {sorted(set(required) - set(props))}"
    return tool


def tools_from_json(data: Any) -> list[ImportedTool]:
    """The tools of an MCP `tools/list` result or an OpenAI function list; ToolImportError on bad shape."""
    if isinstance(data, dict):
        for key in ("tools", "functions"):
            if key in data:
                data = data[key]
                break
        else:
            if "name" in data:  # a single tool
                data = [data]
    if not isinstance(data, list):
        raise ToolImportError(
            'expected an MCP tools/list result ({"tools": [...]}) or an OpenAI function list ([...])'
        )
    if not data:
        raise ToolImportError("the tool list is empty")
    return [_entry(raw, i) for i, raw in enumerate(data)]


def read_tools_file(path: Path) -> list[ImportedTool]:
    """`tools_from_json` of a file, with file errors as ToolImportError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolImportError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolImportError(f"{path}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolImportError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    try:
        return tools_from_json(data)
    except ToolImportError as exc:
        raise ToolImportError(f"{path}: {exc}") from None


class ServerTools(BaseModel):
    """What a live MCP server offered."""

    server_name: str | None
    tools: list[ImportedTool]


async def tools_from_mcp(command: str, args: list[str], *, timeout_s: float = 120.0) -> ServerTools:
    """Start `command args...` as an MCP server over stdio and read every page of its tool list.

    The server's stderr goes to a temporary file whose tail is quoted when the server fails.
    """
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=list(args), env=server_environment(os.environ))
    raw: list[dict[str, Any]] = []
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as errlog:

        def fail(message: str) -> ToolImportError:
            errlog.flush()
            errlog.seek(0)
            lines = [line.rstrip() for line in errlog.read().splitlines() if line.strip()]
            if not lines:
                return ToolImportError(message)
            shown = "\n".join(f"  {line}" for line in lines[-_STDERR_LINES:])
            return ToolImportError(f"{message}; the server's stderr:\n{shown}")

        try:
            with anyio.fail_after(timeout_s):
                async with Client(stdio_client(params, errlog=errlog)) as client:
                    info = client.server_info
                    cursor: str | None = None
                    while True:
                        page = await client.list_tools(cursor=cursor)
                        raw.extend(
                            t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools
                        )
                        cursor = page.next_cursor
                        if not cursor:
                            break
        except TimeoutError:
            raise fail(
                f"the MCP server {command!r} did not list its tools within {timeout_s:.0f} s"
            ) from None
        except OSError as exc:
            raise fail(f"cannot start the MCP server {command!r}: {exc}") from None
        except Exception as exc:  # protocol errors, a server that exits: one clear line for the user
            raise fail(f"the MCP server {command!r} failed: {_leaf_messages(exc)}") from None
    log.info("import.mcp_listed", command=command, tools=len(raw))
    if not raw:
        raise ToolImportError(f"the MCP server {command!r} offers no tools")
    return ServerTools(server_name=info.name if info else None, tools=tools_from_json(raw))


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of an MCP server started for import.

    The MCP client passes only a few safe variables (PATH, HOME, ...) by default; Arena's own
    settings go too, so that `arena mcp ENV` finds an ENV on ARENA_ENV_PATH, secrets excepted.
    The server writes no bytecode: a Python server importing an environment's tools.py would leave
    a __pycache__ in the user's environment folder (even when it then fails).
    """
    from mcp.client.stdio import get_default_environment

    arena = {k: v for k, v in environ.items() if k.startswith("ARENA_") and not _SECRET_VAR.search(k)}
    return get_default_environment() | arena | {"PYTHONDONTWRITEBYTECODE": "1"}


def _leaf_messages(exc: BaseException) -> str:
    """The messages of the innermost exceptions (task groups nest them)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_leaf_messages(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def env_name_from(text: str) -> str:
    """A valid environment name from free text (a server or file name)."""
    name = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")
    if not name or not name[0].isalpha():
        name = f"imported_{name}".rstrip("_")
    return name[:64]


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def write_simulated_env(
    tools: list[ImportedTool],
    out_dir: Path,
    *,
    name: str,
    title: str,
    category: list[str],
    description: str,
    rules: str = "",
    source: str,
    now: str = "2025-06-01T09:00:00",
) -> ImportReport:
    """Filter `tools` and write the kept ones as a simulated environment folder `out_dir`."""
    if not ENV_NAME_RE.fullmatch(name):
        raise ToolImportError(f"environment name {name!r} must be lower-case letters, digits and underscores")
    kept: list[ImportedTool] = []
    dropped: list[ToolQuality] = []
    seen: set[str] = set()
    for tool in tools:
        if tool.problem:
            dropped.append(ToolQuality(name=tool.name, ok=False, reasons=[tool.problem]))
            continue
        if tool.name in seen:
            dropped.append(ToolQuality(name=tool.name, ok=False, reasons=["duplicate name"]))
            continue
        quality = assess_tool(tool.spec())
        if not quality.ok:
            dropped.append(quality)
            continue
        seen.add(tool.name)
        kept.append(tool)
    if not kept:
        reasons = "; ".join(f"{d.name}: {', '.join(d.reasons)}" for d in dropped[:5])
        raise ToolImportError(f"no tool passed the quality filter ({reasons})")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ToolImportError(f"{out_dir} already exists and is not empty; choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        f"name = {_toml_str(name)}",
        f"title = {_toml_str(title)}",
        f"category = [{', '.join(_toml_str(c) for c in category)}]",
        f"description = {_toml_str(description)}",
        'kind = "simulated"',
        f"now = {_toml_str(now)}",
        f"source = {_toml_str(source)}",
    ]
    if rules.strip():
        lines.append(f"rules = {_toml_str(rules.strip())}")
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # what we write must read back
    (out_dir / "env.toml").write_text(text, encoding="utf-8")
    (out_dir / "tools.json").write_text(
        json.dumps({"tools": [t.mcp() for t in kept]}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    try:
        load_environment(out_dir, cache=False)
    except EnvLoadError as exc:  # a defect of the importer, reported rather than left behind silently
        raise ToolImportError(f"the written environment does not load: {exc}") from None
    log.info("import.written", env=name, path=str(out_dir), kept=len(kept), dropped=len(dropped))
    return ImportReport(
        path=str(out_dir),
        env=name,
        kept=[t.name for t in kept],
        dropped=dropped,
        generated=[g for t in kept for g in t.generated],
    )
