"""The database handle every executable tool receives as its first argument."""

from __future__ import annotations

import sqlite3
from typing import Any


class Db:
    """A thin, deterministic view of one episode's SQLite database.

    Tools read and write only through it, and take time and fresh ids only from it, so that
    replaying the same calls on the same initial state reproduces the same final state.
    """

    def __init__(self, conn: sqlite3.Connection, *, now: str, user_id: int | str = 1) -> None:
        self._conn = conn
        self._now = now
        self.user_id = user_id
        self._id_counters: dict[str, int] = {}

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection (for the runtime and verifiers, not for tools)."""
        return self._conn

    def one(self, sql: str, *params: Any) -> dict[str, Any] | None:
        """The first row of a query as a dict, or None."""
        cur = self._conn.execute(sql, params)
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip([d[0] for d in cur.description], row, strict=True))

    def all(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        """Every row of a query as dicts."""
        cur = self._conn.execute(sql, params)
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def execute(self, sql: str, *params: Any) -> int:
        """Run a write statement; returns the number of rows changed."""
        cur = self._conn.execute(sql, params)
        return cur.rowcount if cur.rowcount is not None and cur.rowcount >= 0 else 0

    def now(self) -> str:
        """The episode's fixed current time (ISO 8601), from the environment's `now`."""
        return self._now

    def today(self) -> str:
        """The date part of `now()`."""
        return self._now[:10]

    def new_id(self, prefix: str) -> str:
        """A fresh id, deterministic per episode: `PREFIX-N0001`, `PREFIX-N0002`, ..."""
        n = self._id_counters.get(prefix, 0) + 1
        self._id_counters[prefix] = n
        return f"{prefix}-N{n:04d}"
