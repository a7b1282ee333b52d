"""A cancelled caller never cuts a store transaction: the write lock is free once the caller is gone.

A cancel that lands in the middle of a statement used to make SQLAlchemy close the connection
from a task anyio kept cancelling; on SQLite that connection kept `BEGIN IMMEDIATE`'s write lock,
and the next writer (`arena report` after the daemon returned) failed after the busy timeout.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from arena.store import Store, repo

pytestmark = pytest.mark.anyio


async def test_a_cancel_inside_a_transaction_takes_effect_after_its_commit(tmp_path: Path) -> None:
    async with Store(f"sqlite+aiosqlite:///{tmp_path / 'arena.db'}") as store:
        await store.migrate()
        with anyio.CancelScope() as scope:
            scope.cancel()
            async with store.transaction() as s:
                await repo.ensure_round(s, 1)
                await repo.start_phase(s, 1, "evaluate")
            # The first checkpoint after the transaction: the cancel lands here.
            await anyio.lowlevel.checkpoint()
            pytest.fail("the cancel was lost")
        assert scope.cancelled_caught
        async with store.transaction() as s:
            phase = await repo.get_phase(s, 1, "evaluate")
        assert phase is not None and phase.status == "running"


async def test_transactions_cancelled_at_any_point_leave_the_write_lock_free(tmp_path: Path) -> None:
    path = tmp_path / "arena.db"
    rng = random.Random(7)
    async with Store(f"sqlite+aiosqlite:///{path}") as store:
        await store.migrate()
        for round_no in range(1, 101):
            with anyio.move_on_after(rng.random() * 0.004):  # inside BEGIN, a statement, COMMIT, ...
                async with store.transaction() as s:
                    await repo.ensure_round(s, round_no)
                    await repo.next_round(s)
    # Every connection is closed with the store; a second writer gets the lock at once.
    other = sqlite3.connect(path, timeout=0.5, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        assert other.execute("SELECT count(*) FROM rounds").fetchone() == (100,)
        other.execute("ROLLBACK")
    finally:
        other.close()
