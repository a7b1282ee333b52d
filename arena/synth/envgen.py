"""Environment synthesis from a theme (AWM, Agent-World).

theme -> description (env.toml) -> schema.sql -> seed.sql -> tool specs -> tools.py -> tests.toml,
each step validated before the next: the description is a valid env.toml, the SQL executes (with
foreign keys on, a `users` table whose id 1 is the logged-in user), tool specs are well-formed,
tools.py passes static checks (`ast`: imports from an allow-list only, no clock, randomness or
files: time and ids come from the handle) and, with its tests, loads in the sandbox where every
tool passes more than half of its tests. A failing step gets the error summary back and tries
again (at most `max_tries`); the best attempt is kept. The result is an ordinary environment
folder with `origin = "synthesized"`, written only when every step succeeded.
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
import time
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import structlog
from pydantic import BaseModel, Field, ValidationError

from arena.env.errors import Problems
from arena.env.spec import TOOL_NAME_RE, EnvToml, parse_tests_toml
from arena.protocols import ChatModel, ModelError
from arena.synth.cost import ReportObserver, StageMeter, SynthesisReport
from arena.synth.source_checks import check_tools_source
from arena.types import Message, SamplingParams

log = structlog.get_logger(__name__)

DEFAULT_NOW = "2025-06-01T09:00:00"
STEPS = ("description", "schema", "seed", "tool_specs", "tools", "tests")


class StepRecord(BaseModel):
    """One pipeline step: how many tries it took and the last error."""

    step: str
    tries: int = 0
    ok: bool = False
    error: str | None = None


class EnvGenResult(BaseModel):
    """The outcome: the folder (when every step succeeded), the steps, the cost report."""

    theme: str
    ok: bool
    path: str | None = None
    name: str | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    problem: str | None = None
    report: SynthesisReport


class StepFailed(Exception):
    """A step used up its tries."""


def strip_fences(text: str) -> str:
    """The body of a ```-fenced block if the answer has one, else the text."""
    m = re.search(r"```[a-zA-Z]*\n(.*?)```", text, re.DOTALL)
    return (m.group(1) if m else text).strip() + "\n"


def _sql_problem(
    script: str, base: sqlite3.Connection | None = None
) -> tuple[sqlite3.Connection | None, str | None]:
    conn = sqlite3.connect(":memory:")
    if base is not None:
        base.backup(conn)
    conn.execute("PRAGMA foreign_keys = ON")
    try:
        conn.executescript(script)
    except sqlite3.Error as exc:
        conn.close()
        return None, f"SQL error: {exc}"
    return conn, None


class _Pipeline:
    def __init__(
        self, theme: str, helper: ChatModel, meter: StageMeter, max_tries: int, max_tokens: int
    ) -> None:
        self.theme = theme
        self.helper = helper
        self.meter = meter
        self.max_tries = max_tries
        self.max_tokens = max_tokens
        self.records: list[StepRecord] = []
        self.context: list[str] = [f"Theme: {theme}"]

    async def step(
        self, name: str, request: str, validate: Callable[[str], Awaitable[tuple[Any, float, str | None]]]
    ) -> Any:
        """Ask, validate, feed the error back; keep the best-scoring valid answer."""
        record = StepRecord(step=name)
        self.records.append(record)
        messages = [
            Message(role="user", content=f"Step: {name}\n" + "\n\n".join(self.context) + f"\n\n{request}")
        ]
        best: tuple[float, Any] | None = None
        with self.meter.timed(name) as cost:
            for _ in range(self.max_tries):
                record.tries += 1
                cost.attempted += 1
                try:
                    completion = await self.meter.chat(
                        self.helper,
                        messages,
                        params=SamplingParams(max_tokens=self.max_tokens, temperature=0.4),
                    )
                    text = completion.text
                except ModelError as exc:
                    record.error = f"helper failed: {exc}"
                    break
                value, score, error = await validate(text)
                if error is None and (best is None or score > best[0]):
                    best = (score, value)
                if error is None and score >= 1.0:
                    break
                record.error = error or f"only {score:.0%} good"
                messages = [
                    *messages,
                    Message(role="assistant", content=text[:8000]),
                    Message(
                        role="user",
                        content=f"That is not right: {record.error}\nAnswer again, corrected, in full.",
                    ),
                ]
        if best is None or best[0] < 1.0:
            raise StepFailed(f"{name}: {record.error}")
        record.ok, record.error = True, None
        self.meter.report.stage(name).accepted += 1
        return best[1]


async def synthesize_environment(
    theme: str,
    out_dir: Path,
    *,
    helper: ChatModel,
    sandbox: Any,
    max_tries: int = 5,
    max_tokens: int = 2048,
    now: str = DEFAULT_NOW,
    on_report: ReportObserver | None = None,
) -> EnvGenResult:
    """Build an environment folder for `theme` at `out_dir` (which must not exist); see the module doc."""
    from arena.env.loader import load_environment
    from arena.env.unit_tests import run_tool_tests

    if await anyio.Path(out_dir).exists():
        raise ValueError(f"output folder {out_dir} already exists")
    report = SynthesisReport(env=theme[:60], kind="envgen", requested=1)
    meter = StageMeter(report)
    started = time.perf_counter()
    pipe = _Pipeline(theme, helper, meter, max_tries, max_tokens)
    result = EnvGenResult(theme=theme, ok=False, report=report, steps=pipe.records)
    state: dict[str, Any] = {}

    async def v_description(text: str) -> tuple[Any, float, str | None]:
        try:
            data = json.loads(strip_fences(text))
            spec = EnvToml.model_validate(
                {**data, "kind": "executable", "now": now, "origin": "synthesized"}
                if isinstance(data, dict)
                else data
            )
        except json.JSONDecodeError as exc:
            return None, 0, f"not JSON: {exc.msg}"
        except ValidationError as exc:
            err = exc.errors()[0]
            return None, 0, f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
        return spec, 1.0, None

    async def v_schema(text: str) -> tuple[Any, float, str | None]:
        script = strip_fences(text)
        conn, error = _sql_problem(script)
        if conn is None:
            return None, 0, error
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        cols = [r[1] for r in conn.execute("PRAGMA table_info(users)")]
        conn.close()
        if "users" not in tables or "id" not in cols:
            return (
                None,
                0,
                "the schema needs a `users` table with an `id` column (the logged-in user is id 1)",
            )
        if len(tables) < 2:
            return None, 0, "the schema needs at least two tables"
        return script, 1.0, None

    async def v_seed(text: str) -> tuple[Any, float, str | None]:
        script = strip_fences(text)
        base, _ = _sql_problem(state["schema"])
        assert base is not None
        conn, error = _sql_problem(script, base)
        base.close()
        if conn is None:
            return None, 0, error
        try:
            if conn.execute("PRAGMA foreign_key_check").fetchall():
                return None, 0, "rows reference missing rows (foreign key check fails)"
            if conn.execute("SELECT count(*) FROM users WHERE id = 1").fetchone()[0] != 1:
                return None, 0, "users must contain the logged-in user with id 1"
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            filled = sum(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] > 0 for t in tables)
            if filled * 2 < len(tables):
                return None, 0, f"only {filled} of {len(tables)} tables have rows"
        finally:
            conn.close()
        return script, 1.0, None

    async def v_specs(text: str) -> tuple[Any, float, str | None]:
        try:
            data = json.loads(strip_fences(text))
            tools = data["tools"]
            names = [t["name"] for t in tools]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            return (
                None,
                0,
                f'expected JSON {{"tools": [{{"name", "description", "writes", "parameters"}}]}}: {exc}',
            )
        bad = [n for n in names if not isinstance(n, str) or not TOOL_NAME_RE.fullmatch(n)]
        if bad or len(set(names)) != len(names) or len(names) < 2:
            return None, 0, "need at least two tools with distinct plain names"
        if not any(t.get("writes") for t in tools):
            return None, 0, "at least one tool must change the data (writes: true)"
        return tools, 1.0, None

    async def v_tools(text: str) -> tuple[Any, float, str | None]:
        source = strip_fences(text)
        problems = check_tools_source(source)
        missing = [
            t["name"] for t in state["tool_specs"] if not re.search(rf"def\s+{t['name']}\s*\(", source)
        ]
        if missing:
            problems.append(f"missing tools: {', '.join(missing)}")
        return (None, 0, "; ".join(problems[:8])) if problems else (source, 1.0, None)

    async def v_tests(text: str) -> tuple[Any, float, str | None]:
        body = strip_fences(text)
        try:
            tomllib.loads(body)
        except tomllib.TOMLDecodeError as exc:
            return None, 0, f"invalid TOML: {exc}"
        with tempfile.TemporaryDirectory(prefix="envgen-") as tmp:
            folder = Path(tmp) / state["description"].name
            _write(folder, state, body)
            problems = Problems()
            cases = parse_tests_toml(folder / "tests.toml", problems)
            if problems:
                return None, 0, "; ".join(str(p) for p in list(problems)[:5])
            try:
                env = load_environment(folder, cache=False)
                await env.describe(sandbox)
                gate = await run_tool_tests(env, sandbox=sandbox)
            except Exception as exc:  # EnvLoadError and sandbox faults: the files are the problem
                return None, 0, f"does not load: {str(exc)[:600]}"
            untested = [t for t in env.tool_names if not any(c.tool == t for c in cases or [])]
            score = len(gate.kept_tools) / max(1, len(env.tool_names))
            failing = [c for c in gate.cases if not c.passed][:6]
            summary = "; ".join(f"{c.label}: {c.reason}" for c in failing)
            if untested:
                summary = f"tools without tests: {', '.join(untested)}; " + summary
            return (
                body,
                score,
                None if score >= 1.0 else (summary or gate.reason or "some tools fail their tests"),
            )

    try:
        spec: EnvToml = await pipe.step(
            "description",
            'Describe an application for this theme as JSON: {"name": "lower_snake_case", "title": ..., '
            '"category": ["Top level", "Sub"], "description": ..., "rules": "policy for the support assistant"}',
            v_description,
        )
        state["description"] = spec
        pipe.context.append(f"Application: {spec.title}: {spec.description}")
        state["schema"] = await pipe.step(
            "schema",
            "Write schema.sql (SQLite DDL) with a users table (id INTEGER PRIMARY KEY, ...).",
            v_schema,
        )
        pipe.context.append(f"schema.sql:\n{state['schema']}")
        state["seed"] = await pipe.step(
            "seed", "Write seed.sql: realistic, varied INSERTs; the logged-in user is users.id = 1.", v_seed
        )
        state["tool_specs"] = await pipe.step(
            "tool_specs",
            'List the tools as JSON: {"tools": [{"name", "description", "writes": bool, "parameters": {name: type}}]}',
            v_specs,
        )
        pipe.context.append(f"Tools: {json.dumps(state['tool_specs'])}")
        state["tools"] = await pipe.step(
            "tools",
            "Write tools.py: `from arena.env import Db, ToolError, tool`; each tool is a typed function decorated "
            "with @tool (writes=True for writes) whose first parameter is `db: Db`, with a Google-style docstring "
            "(Args:); use db.one/db.all/db.execute, db.now(), db.new_id(prefix), db.user_id; raise ToolError on bad input.",
            v_tools,
        )
        pipe.context.append(f"tools.py:\n{state['tools']}")
        state["tests"] = await pipe.step(
            "tests",
            "Write tests.toml: [[case]] tables with tool, args and expect (subset of the result), expect_error, "
            "or expect_sql; at least two cases per tool.",
            v_tests,
        )
    except StepFailed as exc:
        result.steps = pipe.records
        result.problem = str(exc)
        report.reject("envgen")
        log.info("envgen_rejected", theme=theme[:60], problem=result.problem)
        report.finish(0, started, on_report)
        return result
    result.steps = pipe.records
    # Write beside the target, then rename: an interrupted run leaves no half-written folder.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".envgen-", dir=out_dir.parent) as tmp:
        staged = Path(tmp) / out_dir.name
        _write(staged, state, state["tests"])
        staged.rename(out_dir)
    result.ok, result.path, result.name = True, str(out_dir), spec.name
    report.finish(1, started, on_report)
    return result


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _write(folder: Path, state: dict[str, Any], tests: str) -> None:
    spec: EnvToml = state["description"]
    folder.mkdir(parents=True, exist_ok=False)
    category = ", ".join(_toml_str(c) for c in spec.category)
    (folder / "env.toml").write_text(
        f"name = {_toml_str(spec.name)}\ntitle = {_toml_str(spec.title)}\ncategory = [{category}]\n"
        f'kind = "executable"\norigin = "synthesized"\nnow = {_toml_str(spec.now)}\n'
        f"description = {_toml_str(spec.description)}\nrules = {_toml_str(spec.rules)}\n",
        encoding="utf-8",
    )
    (folder / "schema.sql").write_text(state["schema"], encoding="utf-8")
    (folder / "seed.sql").write_text(state["seed"], encoding="utf-8")
    (folder / "tools.py").write_text(state["tools"], encoding="utf-8")
    (folder / "tests.toml").write_text(tests, encoding="utf-8")
