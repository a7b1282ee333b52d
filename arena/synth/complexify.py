"""Database complexification (Agent-World): grow an environment's data into a new version.

New rows are derived from existing ones (a deterministic generator: new keys, varied numbers and
dates, foreign keys re-drawn from existing rows, unique values made unique) or proposed by the
helper model. SQLite itself enforces types, CHECK, UNIQUE and foreign keys on insert. Table by
table, the grown environment must still pass its tool unit tests and keep its hand-written tasks
passing both gates; a table whose rows break either is reverted. The result is a copy of the
folder with the new rows appended to `seed.sql`: a new version (its content hash differs), so
tasks made on the old one keep their `env_version`.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sqlite3
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import structlog
from pydantic import BaseModel, Field

from arena.env.loader import load_environment
from arena.env.state import copy_state, user_tables
from arena.protocols import ChatModel, ModelError
from arena.synth.cost import ReportObserver, StageMeter, SynthesisReport
from arena.types import Message, SamplingParams

log = structlog.get_logger(__name__)

_TRIES = 6


class ComplexifyResult(BaseModel):
    """What complexification did."""

    env: str
    path: str
    version_before: str
    version_after: str
    added: dict[str, int] = Field(default_factory=dict)
    reverted: dict[str, str] = Field(default_factory=dict)
    report: SynthesisReport


class ComplexifyError(Exception):
    """The environment cannot be complexified (not executable, nothing could be added, bad output dir)."""


class _Table(BaseModel):
    name: str
    columns: list[str]
    types: dict[str, str]
    pk: list[str]
    fks: dict[str, tuple[str, str]]
    unique: set[str]


def _tables(conn: sqlite3.Connection) -> list[_Table]:
    out: list[_Table] = []
    for name in user_tables(conn, by_name=False):
        info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
        fks = {r[3]: (r[2], r[4]) for r in conn.execute(f'PRAGMA foreign_key_list("{name}")')}
        unique: set[str] = set()
        for idx in conn.execute(f'PRAGMA index_list("{name}")').fetchall():
            if idx[2]:  # unique
                cols = [c[2] for c in conn.execute(f'PRAGMA index_info("{idx[1]}")')]
                if len(cols) == 1:
                    unique.add(cols[0])
        out.append(
            _Table(
                name=name,
                columns=[r[1] for r in info],
                types={r[1]: (r[2] or "").upper() for r in info},
                pk=[r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]],
                fks=fks,
                unique=unique,
            )
        )
    return out


def _rows(conn: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    cur = conn.execute(f'SELECT * FROM "{table}"')
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _next_key(values: list[Any], offset: int) -> Any:
    ints = [v for v in values if isinstance(v, int)]
    if ints and len(ints) == len(values):
        return max(ints) + offset
    best: tuple[str, int, int] | None = None
    for v in values:
        m = re.fullmatch(r"(.*?)(\d+)", str(v))
        if m and (best is None or int(m.group(2)) > best[1]):
            best = (m.group(1), int(m.group(2)), len(m.group(2)))
    if best is None:
        return f"{values[0]}-X{offset}" if values else f"X{offset}"
    prefix, number, width = best
    return f"{prefix}{str(number + offset).zfill(width)}"


def _vary(value: Any, column: str, table: _Table, rows: list[dict[str, Any]], rng: random.Random) -> Any:
    if value is None:
        return None
    if column in table.fks:
        return rng.choice(rows)[column] if column != "user_id" else value
    if isinstance(value, bool) or (isinstance(value, int) and {r[column] for r in rows} <= {0, 1}):
        return rng.choice([0, 1]) if rng.random() < 0.3 else value
    if isinstance(value, float):
        return round(value * rng.uniform(0.75, 1.25), 2)
    if isinstance(value, int):
        return max(0, value + rng.randint(-2, 2))
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
        if moment is not None and len(value) >= 10 and value[4] == "-":
            shifted = moment + timedelta(days=rng.randint(-20, 20))
            return shifted.date().isoformat() if len(value) == 10 else shifted.isoformat(timespec="seconds")
        if rng.random() < 0.3:
            return rng.choice(rows)[column]
    return value


def _make_unique(value: Any, k: int) -> Any:
    if isinstance(value, str) and "@" in value:
        local, _, domain = value.partition("@")
        return f"{local}.{k}@{domain}"
    if isinstance(value, str):
        return f"{value} {k}"
    return value


def derive_rows(
    conn: sqlite3.Connection,
    table: _Table,
    n: int,
    rng: random.Random,
    user_id: Any,
    *,
    mine_share: float = 0.6,
) -> list[dict[str, Any]]:
    """Insert up to `n` rows derived from the table's rows; returns the inserted rows.

    `mine_share` of the source rows belong to the logged-in user (when the table has `user_id`);
    0 derives only from other users' rows.
    """
    rows = _rows(conn, table.name)
    if not rows:
        return []
    added: list[dict[str, Any]] = []
    offset = 1
    for i in range(n):
        for attempt in range(_TRIES):
            mine = [r for r in rows if r.get("user_id") == user_id]
            others = [r for r in rows if r.get("user_id") != user_id] or rows
            src = rng.choice(mine if mine and rng.random() < mine_share else others)
            new = {c: _vary(src[c], c, table, rows, rng) for c in table.columns}
            if len(table.pk) == 1:
                new[table.pk[0]] = _next_key([r[table.pk[0]] for r in rows], offset)
                offset += 1
            for col in table.unique - set(table.pk) - set(table.fks):
                new[col] = _make_unique(src[col], 1000 + i * _TRIES + attempt)
            cols = ", ".join(f'"{c}"' for c in table.columns)
            marks = ", ".join("?" for _ in table.columns)
            try:
                conn.execute(
                    f'INSERT INTO "{table.name}" ({cols}) VALUES ({marks})', [new[c] for c in table.columns]
                )
            except sqlite3.Error:
                continue
            added.append(new)
            rows.append(new)
            break
    return added


def _insert_sql(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> str:
    cols = ", ".join(row)
    values = ", ".join(conn.execute("SELECT quote(?)", (v,)).fetchone()[0] for v in row.values())
    return f"INSERT INTO {table} ({cols}) VALUES ({values});"


async def _validate(folder: Path, sandbox: Any) -> str | None:
    """Why the grown folder is unusable (broken tool tests or hand-written tasks), or None."""
    from arena.env.errors import EnvLoadError
    from arena.env.unit_tests import run_tool_tests
    from arena.tasks.gates import run_gates
    from arena.tasks.toml_io import load_tasks

    try:
        env = load_environment(folder, cache=False)
        if env.sandboxed and sandbox is not None:
            await env.describe(sandbox)
        gate = await run_tool_tests(env, sandbox=sandbox if env.sandboxed else None)
        if not gate.ok or gate.dropped_tools:
            return f"tool tests fail for {', '.join(gate.dropped_tools) or 'some tools'}"
        for task in load_tasks(folder, env.name, tools=env.tools or None, write_tools=env.write_tools):
            report = await run_gates(env, task, sandbox=sandbox)
            if not report.ok:
                return f"hand-written task {task.id} no longer passes its gates"
    except EnvLoadError as exc:
        return f"does not load: {exc.problems[0] if exc.problems else exc}"
    return None


async def _helper_rows(
    helper: ChatModel, conn: sqlite3.Connection, table: _Table, n: int, meter: StageMeter
) -> list[dict[str, Any]]:
    """Rows the helper proposes for a table; only those SQLite accepts are inserted and returned."""
    examples = _rows(conn, table.name)[:3]
    prompt = (
        f"Table {table.name} has columns {', '.join(table.columns)}. Example rows:\n"
        + "\n".join(json.dumps(r, default=str) for r in examples)
        + f'\nPropose {n} new, realistic, different rows with new keys, as JSON: {{"rows": [...]}}'
    )
    try:
        completion = await meter.chat(
            helper,
            [Message(role="user", content=prompt)],
            params=SamplingParams(max_tokens=512),
            stage="helper_rows",
        )
        rows = json.loads(completion.text)["rows"]
    except (ModelError, ValueError, KeyError, TypeError):
        return []
    added: list[dict[str, Any]] = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or set(row) != set(table.columns):
            continue
        try:
            conn.execute(
                f'INSERT INTO "{table.name}" ({", ".join(table.columns)}) VALUES ({", ".join("?" for _ in table.columns)})',
                [row[c] for c in table.columns],
            )
        except (sqlite3.Error, TypeError):
            continue
        added.append(row)
    return added


async def complexify(
    env: Any,
    out_dir: Path,
    *,
    rows: int = 20,
    seed: int = 0,
    helper: ChatModel | None = None,
    sandbox: Any = None,
    on_report: ReportObserver | None = None,
) -> ComplexifyResult:
    """Write a grown copy of `env` to `out_dir` (which must not exist yet) and return what was added."""
    if env.kind != "executable" or env.template is None:
        raise ComplexifyError(
            f"environment {env.name!r} is {env.kind}: only executable ones have data to grow"
        )
    if await anyio.Path(out_dir).exists():
        raise ComplexifyError(f"output folder {out_dir} already exists")
    report = SynthesisReport(env=env.name, kind="complexify", requested=rows)
    meter = StageMeter(report)
    started = time.perf_counter()
    rng = random.Random(f"{env.name}:{env.version}:{seed}")
    conn = copy_state(env.template)
    conn.execute("PRAGMA query_only = OFF")
    conn.execute("PRAGMA foreign_keys = ON")
    tables = [t for t in _tables(conn) if conn.execute(f'SELECT count(*) FROM "{t.name}"').fetchone()[0] > 0]
    total = sum(conn.execute(f'SELECT count(*) FROM "{t.name}"').fetchone()[0] for t in tables) or 1
    seed_text = (env.path / "seed.sql").read_text(encoding="utf-8")
    accepted: list[str] = []
    result = ComplexifyResult(
        env=env.name, path=str(out_dir), version_before=env.version, version_after=env.version, report=report
    )
    with tempfile.TemporaryDirectory(prefix="complexify-") as tmp:
        work = Path(tmp) / env.path.name
        shutil.copytree(env.path, work, ignore=shutil.ignore_patterns("__pycache__"))
        for table in tables:
            count = conn.execute(f'SELECT count(*) FROM "{table.name}"').fetchone()[0]
            share = max(1, round(rows * count / total))
            # The user's own rows first; when they break a test that counts the user's rows,
            # rows of other users still grow the state the agent searches through.
            shares = [0.6, 0.0] if "user_id" in table.columns else [0.6]
            problem: str | None = "nothing added"
            for mine_share in shares:
                with meter.timed("rows") as cost:
                    cost.attempted += share
                    conn.execute("SAVEPOINT grow")
                    new = await _helper_rows(helper, conn, table, share, meter) if helper is not None else []
                    new += derive_rows(conn, table, share - len(new), rng, env.user_id, mine_share=mine_share)
                if not new:
                    conn.execute("RELEASE grow")
                    break
                statements = [_insert_sql(conn, table.name, r) for r in new]
                candidate = [*accepted, f"-- complexified: {table.name}", *statements]
                text = seed_text.rstrip() + "\n\n" + "\n".join(candidate) + "\n"
                (work / "seed.sql").write_text(text, encoding="utf-8")
                with meter.timed("validate"):
                    problem = await _validate(work, sandbox)
                if problem is None:
                    conn.execute("RELEASE grow")
                    accepted = candidate
                    result.added[table.name] = len(new)
                    report.stage("rows").accepted += len(new)
                    result.reverted.pop(table.name, None)
                    break
                conn.execute("ROLLBACK TO grow")
                conn.execute("RELEASE grow")
                result.reverted[table.name] = problem
                report.reject("tests")
        conn.close()
        if not accepted:
            raise ComplexifyError(f"no rows could be added to {env.name} without breaking its tests or tasks")
        (work / "seed.sql").write_text(
            seed_text.rstrip() + "\n\n" + "\n".join(accepted) + "\n", encoding="utf-8"
        )
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(work, out_dir)
    new_env = load_environment(out_dir, cache=False)
    result.version_after = new_env.version
    report.finish(sum(result.added.values()), started, on_report)
    log.info("env_complexified", env=env.name, added=result.added, reverted=list(result.reverted))
    return result
