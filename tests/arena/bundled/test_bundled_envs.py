"""Every bundled executable environment, through the real loader, unit-test gate and task gates.

Each one meets the size bar, its seed is referentially sound, every `tests.toml` case passes, and
every hand-written task passes both gates (the reference replay scores 1.0, an empty episode does
not pass). The list is discovered, so an environment added to `arena/env/bundled` is held to the
same bar without touching this file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import anyio
import pytest

from arena.env.loader import BUNDLED_ROOT, load_environment
from arena.env.registry import bundled_env_dirs
from arena.env.runtime import Environment
from arena.env.unit_tests import run_tool_tests
from arena.tasks.gates import run_gates
from arena.tasks.model import Task
from arena.tasks.toml_io import load_tasks

ENVS = [p.name for p in bundled_env_dirs() if load_environment(p).kind == "executable"]


def test_the_bundled_set_is_broad() -> None:
    assert len(ENVS) >= 8
    assert len({_env(name).category[0] for name in ENVS}) >= 4


def _env(name: str) -> Environment:
    return load_environment(BUNDLED_ROOT / name)


def _tasks(env: Environment) -> list[Task]:
    return load_tasks(env.path, env.name, tools=env.tools)


@pytest.fixture
def seeded(request: pytest.FixtureRequest) -> Iterator[sqlite3.Connection]:
    """The environment's schema and seed in a fresh in-memory database, foreign keys on."""
    env = _env(request.param)
    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.executescript((env.path / "schema.sql").read_text())
    conn.executescript((env.path / "seed.sql").read_text())
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize("name", ENVS)
def test_env_meets_the_bar(name: str) -> None:
    env = _env(name)
    assert env.kind == "executable"
    assert len(env.category) == 2 and all(env.category)
    assert env.rules.strip() and env.description.strip()
    assert len(env.tools) >= 8
    assert sum(t.writes for t in env.tools.values()) >= 3
    per_tool = dict.fromkeys(env.tools, 0)
    for case in env.tests:
        per_tool[case.tool] += 1
    assert all(n >= 2 for n in per_tool.values()), per_tool
    for spec in env.tool_specs:
        assert spec.description, spec.name
        for prop, schema in spec.parameters.get("properties", {}).items():
            assert schema.get("description"), f"{spec.name}.{prop} has no description"


@pytest.mark.parametrize("seeded", ENVS, indirect=True)
def test_seed_is_large_and_consistent(seeded: sqlite3.Connection) -> None:
    tables = [r[0] for r in seeded.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    counts = {t: seeded.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    assert sum(counts.values()) >= 100, counts
    assert sum(1 for n in counts.values() if n) >= 4, counts
    assert seeded.execute("PRAGMA foreign_key_check").fetchall() == []
    assert seeded.execute("SELECT count(*) FROM users WHERE id = 1").fetchone()[0] == 1
    # other users exist, so refusing someone else's data is something the tools must do
    assert seeded.execute("SELECT count(*) FROM users WHERE id != 1").fetchone()[0] >= 2


@pytest.mark.parametrize("name", ENVS)
def test_every_tool_case_passes(name: str) -> None:
    report = anyio.run(run_tool_tests, _env(name))
    failures = [(c.label, c.reason) for c in report.cases if not c.passed]
    assert report.ok and not failures, failures
    assert not report.dropped_tools


@pytest.mark.parametrize("name", ENVS)
def test_tasks_pass_both_gates(name: str) -> None:
    env = _env(name)
    tasks = _tasks(env)
    assert len(tasks) >= 5
    assert any(t.mode == "conversational" and t.user is not None for t in tasks)
    multi_step_writes = [
        t for t in tasks if len(t.reference) >= 2 and any(env.tools[c.name].writes for c in t.reference)
    ]
    assert multi_step_writes
    # short look-up-then-act tasks for the small-policy demonstration
    assert any(len(t.reference) in (2, 3) and env.tools[t.reference[-1].name].writes for t in tasks)

    async def gates() -> list[tuple[str, str, str]]:
        failed = []
        for task in tasks:
            report = await run_gates(env, task)
            if not report.ok:
                failed.append((task.id, report.gold.detail, report.empty.detail))
        return failed

    assert anyio.run(gates) == []


def test_check_kinds_are_mixed() -> None:
    kinds = {check.kind for name in ENVS for task in _tasks(_env(name)) for check in task.checks}
    assert {"state_match", "sql", "answer", "python"} <= kinds
