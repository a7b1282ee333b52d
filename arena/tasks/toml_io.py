"""Loading hand-written tasks from an environment folder's `tasks.toml` (format in DESIGN §3).

Every problem is collected, with the file, the line and the field, before one `EnvLoadError` is
raised, so an author fixes the whole file in one pass. tomllib reports no positions for values,
so lines come from a scan of the `[[task]]`, `[[task.check]]` and `[[task.reference]]` headers and
of `key =` lines inside them.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arena.env.errors import Problems
from arena.env.tool import ToolDef, ToolError
from arena.protocols import UserContext
from arena.tasks.model import ActionCheck, Check, Task, TaskMode
from arena.types import ToolCall

TASKS_FILE = "tasks.toml"

_HEADER = re.compile(r"^\s*\[\[\s*task(?:\s*\.\s*(check|reference))?\s*\]\]")
_ANY_HEADER = re.compile(r"^\s*\[")
_KINDS = ("state_match", "sql", "answer", "python", "rubric", "action")


class _ReferenceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class _TaskEntry(BaseModel):
    """One `[[task]]` table exactly as written (TOML key names: `check`, `reference`)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    instruction: str
    mode: TaskMode = "autonomous"
    answer: str | None = None
    user: UserContext | None = None
    reference: list[_ReferenceEntry] = Field(default_factory=list)
    check: list[Check] = Field(min_length=1)
    difficulty: dict[str, float | int | str] = Field(default_factory=dict)
    derived_args: list[str] = Field(default_factory=list)


@dataclass
class _Block:
    """Line numbers (1-based) of one `[[task]]` table and its sub-tables."""

    start: int
    end: int = 0
    subs: dict[str, list[int]] = field(default_factory=lambda: {"check": [], "reference": []})


def _scan(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        m = _HEADER.match(line)
        if m is None:
            continue
        if m.group(1) is None:
            if blocks:
                blocks[-1].end = number - 1
            blocks.append(_Block(start=number))
        elif blocks:
            blocks[-1].subs[m.group(1)].append(number)
    if blocks:
        blocks[-1].end = len(lines)
    return blocks


def _find_key(lines: list[str], key: str, start: int, end: int) -> int | None:
    """The first line in [start, end] that sets `key`, not crossing into another table."""
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number in range(start, min(end, len(lines)) + 1):
        line = lines[number - 1]
        if number > start and _ANY_HEADER.match(line):
            return None
        if pattern.match(line):
            return number
    return None


def _locate(lines: list[str], block: _Block | None, loc: tuple[Any, ...]) -> int | None:
    """Best line for an error at pydantic location `loc` inside one task."""
    if block is None:
        return None
    loc = _untagged(loc)
    key = next((p for p in reversed(loc) if isinstance(p, str)), None)
    if len(loc) >= 2 and loc[0] in ("check", "reference") and isinstance(loc[1], int):
        headers = block.subs[loc[0]]
        if loc[1] < len(headers):
            start = headers[loc[1]]
            if len(loc) > 2 and key is not None:
                return _find_key(lines, key, start, block.end) or start
            return start
    if isinstance(loc[0], str) if loc else False:
        return _find_key(lines, str(loc[0]), block.start, block.end) or block.start
    return block.start


def _untagged(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop the union tag pydantic puts after `check[i]` (`check, 0, 'sql', 'name'`)."""
    if len(loc) >= 3 and loc[0] == "check" and isinstance(loc[1], int) and loc[2] in _KINDS:
        return loc[:2] + loc[3:]
    return loc


def _field(index: int, loc: tuple[Any, ...]) -> str:
    parts = [f"task[{index}]"]
    for p in _untagged(loc):
        if isinstance(p, int):
            parts[-1] += f"[{p}]"
        else:
            parts.append(str(p))
    return ".".join(parts)


def parse_tasks(
    text: str,
    *,
    path: Path | str,
    env: str,
    tools: Mapping[str, ToolDef] | None = None,
    write_tools: Collection[str] | None = None,
) -> list[Task]:
    """Parse `tasks.toml` text into tasks of `env`; raises `EnvLoadError` listing every problem.

    With `tools`, reference calls are checked too (the tool must exist and accept the arguments).
    With `tools` or `write_tools` (a sandboxed environment's, whose tools are not importable here),
    a task whose reference writes gets a `state_match` check if it has none
    (`Task.with_state_guard`).
    """
    if write_tools is None and tools is not None:
        write_tools = [name for name, tool in tools.items() if tool.writes]
    problems = Problems()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        problems.add(path, f"invalid TOML: {exc}", line=int(m.group(1)) if m else None)
        problems.raise_if_any()
        return []
    lines = text.splitlines()
    blocks = _scan(text)
    for key in data:
        if key != "task":
            problems.add(
                path,
                f"unknown top-level key {key!r}: tasks go in [[task]] tables",
                line=_find_key(lines, key, 1, len(lines)),
                field=key,
            )
    raw_tasks = data.get("task", [])
    if not isinstance(raw_tasks, list):
        problems.add(path, "`task` must be an array of tables: write [[task]]", field="task")
        raw_tasks = []
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_tasks):
        block = blocks[index] if index < len(blocks) else None
        label = f"task {raw.get('id')!r}" if isinstance(raw, dict) and raw.get("id") else f"task #{index + 1}"
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(raw_id, str) and raw_id in seen:
            problems.add(
                path,
                f"{label}: duplicate id (first used by task #{seen[raw_id] + 1})",
                line=_locate(lines, block, ("id",)),
                field=_field(index, ("id",)),
            )
            continue
        if isinstance(raw_id, str):
            seen[raw_id] = index
        task = _one_task(raw, index, label, env=env, path=path, lines=lines, block=block, problems=problems)
        if task is None:
            continue
        if tools is not None:
            _check_reference(
                task, index, label, tools, path=path, lines=lines, block=block, problems=problems
            )
        if write_tools is not None:
            task = task.with_state_guard(write_tools)
        tasks.append(task)
    problems.raise_if_any()
    return tasks


def _one_task(
    raw: Any,
    index: int,
    label: str,
    *,
    env: str,
    path: Path | str,
    lines: list[str],
    block: _Block | None,
    problems: Problems,
) -> Task | None:
    if not isinstance(raw, dict):
        problems.add(
            path, f"{label}: must be a table", line=block.start if block else None, field=f"task[{index}]"
        )
        return None
    try:
        entry = _TaskEntry.model_validate(raw)
        return Task(
            id=entry.id,
            env=env,
            instruction=entry.instruction,
            mode=entry.mode,
            answer=entry.answer,
            user=entry.user,
            reference=[ToolCall(name=r.tool, arguments=r.args) for r in entry.reference],
            checks=entry.check,
            difficulty=entry.difficulty,
            derived_args=entry.derived_args,
            origin="manual",
        )
    except ValidationError as exc:
        for err in exc.errors():
            # Task's own field names differ from the TOML keys in two places.
            loc = tuple({"checks": "check"}.get(p, p) if isinstance(p, str) else p for p in err["loc"])
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown key"
            problems.add(
                path, f"{label}: {message}", line=_locate(lines, block, loc), field=_field(index, loc)
            )
        return None


def _check_reference(
    task: Task,
    index: int,
    label: str,
    tools: Mapping[str, ToolDef],
    *,
    path: Path | str,
    lines: list[str],
    block: _Block | None,
    problems: Problems,
) -> None:
    for i, call in enumerate(task.reference):
        loc = ("reference", i, "tool")
        tool = tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            problems.add(
                path,
                f"{label}: reference call {i + 1} uses unknown tool {call.name!r} (tools: {known})",
                line=_locate(lines, block, loc),
                field=_field(index, loc),
            )
            continue
        try:
            tool.validate(call.arguments)
        except ToolError as exc:
            loc = ("reference", i, "args")
            problems.add(
                path,
                f"{label}: reference call {i + 1}: {exc}",
                line=_locate(lines, block, loc),
                field=_field(index, loc),
            )
    for c, check in enumerate(task.checks):
        if not isinstance(check, ActionCheck):
            continue
        loc = ("check", c, "calls")
        for call in check.calls:
            tool = tools.get(call.tool)
            if tool is None or not tool.writes:
                why = "is not a tool of this environment" if tool is None else "does not write"
                problems.add(
                    path,
                    f"{label}: action check {check.label!r} names {call.tool!r}, which {why} "
                    "(an action check lists write calls)",
                    line=_locate(lines, block, loc),
                    field=_field(index, loc),
                )


def load_tasks(
    folder: Path,
    env: str | None = None,
    *,
    tools: Mapping[str, ToolDef] | None = None,
    write_tools: Collection[str] | None = None,
) -> list[Task]:
    """The tasks of an environment folder (`[]` without a `tasks.toml`); `env` defaults to the folder name.

    Raises `EnvLoadError` with every problem found (file, line, field, message).
    """
    path = folder / TASKS_FILE if folder.is_dir() else folder
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems = Problems()
        problems.add(path, f"cannot read: {exc}")
        problems.raise_if_any()
        return []
    name = env or (folder.name if folder.is_dir() else folder.parent.name)
    return parse_tasks(text, path=path, env=name, tools=tools, write_tools=write_tools)
