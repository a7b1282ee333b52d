"""Fault injection: SIGKILL the daemon at random points, restart, and check nothing is lost or redone.

The daemon runs the fake phases (real work-item runner, real store, real transactions) as a
subprocess. It is killed at least ten times at random moments, restarted each time, and finally
left to finish. Then: every round is completed, every episode committed before any kill is still
there unchanged (not lost, not redone), none is duplicated, and the store's integrity check passes.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

import anyio
import httpx
import pytest

from arena.store import Store, check_integrity
from ops.phases.base import PHASE_ORDER

ROUNDS, TASKS, SAMPLES = 6, 10, 2
FAKE_ENV = {
    "ARENA_DAEMON__LAST_ROUND": str(ROUNDS),
    "FAKE_TASKS": str(TASKS),
    "FAKE_SAMPLES": str(SAMPLES),
    "FAKE_STEPS": "5",
    "FAKE_DELAY": "0.03",
}


def committed(db: Path) -> dict[tuple[int, str, int], tuple[int, str, float]]:
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        try:
            rows = conn.execute(
                "SELECT round, task_id, sample_idx, id, created_at, reward FROM episodes"
            ).fetchall()
        except sqlite3.OperationalError:  # killed before the first migration committed
            return {}
    return {(r, t, s): (i, c, w) for r, t, s, i, c, w in rows}


def wait_for_phase(proc, base: str, phase: str, limit: float = 3) -> str | None:
    """Poll /status until `phase` runs (or `limit` passes); the phase running at the end, if any."""
    deadline = time.monotonic() + limit
    current = None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            current = httpx.get(f"{base}/status", timeout=1).json().get("phase")
        except httpx.HTTPError:
            current = None
        if current == phase:
            break
        time.sleep(0.005)
    return current


def wait_healthy(proc, base: str, limit: float = 30) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(0.05)
    return False


@pytest.mark.slow
def test_sigkill_at_random_points_loses_and_redoes_nothing(tmp_path: Path, spawn_daemon) -> None:
    rng = random.Random(20260101)
    db = tmp_path / "var" / "arena.db"
    seen: dict[tuple[int, str, int], tuple[int, str, float]] = {}
    kills = 0
    hit: set[str] = set()
    for attempt in range(14):
        proc, base = spawn_daemon(tmp_path, **FAKE_ENV)
        if not wait_healthy(proc, base):
            out = proc.communicate(timeout=10)[0]
            pytest.fail(f"daemon did not come up:\n{out}")
        # Aim each kill at a phase in turn, then a random moment inside it (or just after it).
        current = wait_for_phase(proc, base, PHASE_ORDER[attempt % len(PHASE_ORDER)])
        time.sleep(rng.uniform(0.0, 0.1))
        if proc.poll() is not None:  # finished every round already
            break
        proc.kill()
        if current is not None:
            hit.add(current)
        proc.wait(timeout=10)
        kills += 1
        now = committed(db)
        for key, value in seen.items():
            assert now.get(key) == value, f"episode {key} lost or redone after kill {kills}"
        seen = now
        if kills >= 10:
            break
    assert kills >= 10
    assert len(hit) >= 5, f"kills landed in {sorted(hit)} only"

    proc, _ = spawn_daemon(tmp_path, **FAKE_ENV)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, out[-3000:]

    final = committed(db)
    for key, value in seen.items():
        assert final.get(key) == value, f"episode {key} lost or redone by the final run"
    assert set(final) == {
        (r, f"fake/t{t}", s) for r in range(1, ROUNDS + 1) for t in range(TASKS) for s in range(SAMPLES)
    }
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        statuses = conn.execute("SELECT round, status FROM rounds ORDER BY round").fetchall()
    assert statuses == [(r, "completed") for r in range(1, ROUNDS + 1)]

    async def integrity():
        async with Store(f"sqlite+aiosqlite:///{db}") as store, store.transaction() as s:
            return await check_integrity(s)

    report = anyio.run(integrity)
    assert report.ok, report.problems
    assert report.counts["episodes"] == ROUNDS * TASKS * SAMPLES
    assert report.counts["phases"] == ROUNDS * 6
