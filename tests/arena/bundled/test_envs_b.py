"""Bundled environments, set B: hotels, flights, shop_orders, project_tracker, library.

Each one loads through the real loader, passes every tool unit test in its `tests.toml`, meets the
size bar (tools, write tools, seed rows and tables), and every hand-written task passes both gates:
replaying the reference scores 1.0 and an empty episode does not pass.
"""

from __future__ import annotations

import sqlite3

import anyio
import pytest

from arena.env.loader import BUNDLED_ROOT, load_environment
from arena.env.runtime import Environment
from arena.env.unit_tests import run_tool_tests
from arena.tasks.gates import run_gates
from arena.tasks.model import Task
from arena.tasks.toml_io import load_tasks

ENVS = ["hotels", "flights", "shop_orders", "project_tracker", "library"]


def _env(name: str) -> Environment:
    return load_environment(BUNDLED_ROOT / name)


def _tasks(env: Environment) -> list[Task]:
    return load_tasks(env.path, env.name, tools=env.tools)


def _seed_counts(env: Environment) -> dict[str, int]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript((env.path / "schema.sql").read_text())
        conn.executescript((env.path / "seed.sql").read_text())
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


@pytest.mark.parametrize("name", ENVS)
def test_env_meets_the_bar(name: str) -> None:
    env = _env(name)
    assert env.kind == "executable"
    assert len(env.category) == 2 and env.rules.strip()
    assert len(env.tools) >= 8
    assert sum(t.writes for t in env.tools.values()) >= 3
    counts = _seed_counts(env)
    assert sum(counts.values()) >= 100
    assert sum(1 for n in counts.values() if n) >= 4
    per_tool = {t: 0 for t in env.tools}
    for case in env.tests:
        per_tool[case.tool] += 1
    assert all(n >= 2 for n in per_tool.values()), per_tool


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
    assert any(len(t.reference) >= 2 and any(env.tools[c.name].writes for c in t.reference) for t in tasks)

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
