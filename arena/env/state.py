"""Database states: in-memory copies, serialized images, table dumps and state diffs.

A state is an in-memory SQLite connection. Copies use the SQLite backup API (page copy inside the
process, no file and no process); images are `Connection.serialize()` bytes, the form the sandbox
workers exchange. A diff keys rows by primary key (or rowid for tables without one).
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

from pydantic import BaseModel, Field

# Backups read the source connection; a template is shared by every instance of an environment,
# and sqlite3 connections must not be used by two threads at once.
_COPY_LOCK = threading.Lock()


def connect_memory() -> sqlite3.Connection:
    """A fresh in-memory database in autocommit mode (the runtime manages transactions itself)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    # Connection-level, not stored in the database: every copy must switch it on again.
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def copy_state(source: sqlite3.Connection) -> sqlite3.Connection:
    """An independent in-memory copy of `source` (SQLite backup API)."""
    target = connect_memory()
    with _COPY_LOCK:
        source.backup(target)
    return target


def to_image(conn: sqlite3.Connection) -> bytes:
    """The database as bytes (`serialize`), for the sandbox or for storage."""
    with _COPY_LOCK:
        return conn.serialize()


def from_image(image: bytes) -> sqlite3.Connection:
    """An in-memory database holding a serialized image."""
    conn = connect_memory()
    conn.deserialize(image)
    return conn


def user_tables(conn: sqlite3.Connection, *, by_name: bool = True) -> list[str]:
    """The tables of a database, internal `sqlite_*` ones excluded.

    Sorted by name, or with `by_name=False` in the order the schema created them (the synthesizers
    draw from tables in that order, so their seeded choices depend on it).
    """
    order = "name" if by_name else "rowid"
    rows = conn.execute(
        f"SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY {order}"
    ).fetchall()
    return [r[0] for r in rows]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _key_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    info = conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
    pk = sorted((row[5], row[1]) for row in info if row[5])
    return [name for _, name in pk]


def _rows_by_key(
    conn: sqlite3.Connection, table: str
) -> tuple[list[str], dict[tuple[Any, ...], dict[str, Any]]]:
    keys = _key_columns(conn, table)
    q = _quote(table)
    if keys:
        cur = conn.execute(f"SELECT * FROM {q}")
        names = [d[0] for d in cur.description]
        idx = [names.index(k) for k in keys]
        return keys, {tuple(row[i] for i in idx): dict(zip(names, row, strict=True)) for row in cur}
    # No declared primary key: rows are keyed by rowid (WITHOUT ROWID tables always have a key).
    cur = conn.execute(f"SELECT rowid AS __rowid__, * FROM {q}")
    names = [d[0] for d in cur.description][1:]
    return ["rowid"], {(row[0],): dict(zip(names, row[1:], strict=True)) for row in cur}


def dump_state(conn: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows as dicts, ordered by key: a plain, comparable picture of a state."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table in user_tables(conn):
        _, rows = _rows_by_key(conn, table)
        out[table] = [rows[k] for k in sorted(rows, key=_sort_key)]
    return out


def _sort_key(key: tuple[Any, ...]) -> tuple[tuple[int, Any], ...]:
    # Mixed types in a key column (SQLite allows it) must not break sorting.
    return tuple((0, v) if isinstance(v, int | float) else (1, str(v)) for v in key)


class RowChange(BaseModel):
    """One row present in both states with different values."""

    key: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]
    columns: list[str] = Field(description="The columns whose values differ.")


class TableDiff(BaseModel):
    """Rows added, removed and changed in one table."""

    key: list[str]
    added: list[dict[str, Any]] = Field(default_factory=list)
    removed: list[dict[str, Any]] = Field(default_factory=list)
    changed: list[RowChange] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when the table is unchanged."""
        return not (self.added or self.removed or self.changed)


class StateDiff(BaseModel):
    """Per-table differences between two states; only changed tables are listed."""

    tables: dict[str, TableDiff] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when the two states hold the same rows."""
        return not self.tables

    def counts(self) -> dict[str, dict[str, int]]:
        """`{table: {"added": n, "removed": n, "changed": n}}`, for logs and summaries."""
        return {
            name: {"added": len(t.added), "removed": len(t.removed), "changed": len(t.changed)}
            for name, t in self.tables.items()
        }


def _columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA {schema}.table_info({_quote(table)})")]


def _pair(before_image: bytes, after_image: bytes) -> sqlite3.Connection:
    """One scratch connection holding `after` as `main` and `before` as `b`, for set queries in C."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.deserialize(after_image)
    conn.execute("ATTACH DATABASE ':memory:' AS b")
    conn.deserialize(before_image, name="b")
    return conn


def _set_diff(pair: sqlite3.Connection, table: str, keys: list[str], cols: list[str]) -> TableDiff:
    """Diff one table with EXCEPT in both directions: only the differing rows reach Python."""
    q = _quote(table)
    if keys:
        select, names, key_names = ", ".join(_quote(c) for c in cols), cols, keys
        idx = [cols.index(k) for k in keys]
    else:  # keyed by rowid, which is then part of each compared row
        select, names, key_names = "rowid, " + ", ".join(_quote(c) for c in cols), ["rowid", *cols], ["rowid"]
        idx = [0]

    def rows(sql: str) -> dict[tuple[Any, ...], dict[str, Any]]:
        out = {}
        for row in pair.execute(sql):
            values = dict(zip(names, row, strict=True))
            if not keys:
                values.pop("rowid")
            out[tuple(row[i] for i in idx)] = values
        return out

    new = rows(f"SELECT {select} FROM main.{q} EXCEPT SELECT {select} FROM b.{q}")
    old = rows(f"SELECT {select} FROM b.{q} EXCEPT SELECT {select} FROM main.{q}")
    return _table_diff(key_names, old, new)


def _table_diff(
    key_names: list[str],
    rows_b: dict[tuple[Any, ...], dict[str, Any]],
    rows_a: dict[tuple[Any, ...], dict[str, Any]],
) -> TableDiff:
    diff = TableDiff(key=key_names)
    for k in sorted(rows_a.keys() - rows_b.keys(), key=_sort_key):
        diff.added.append(rows_a[k])
    for k in sorted(rows_b.keys() - rows_a.keys(), key=_sort_key):
        diff.removed.append(rows_b[k])
    for k in sorted(rows_a.keys() & rows_b.keys(), key=_sort_key):
        old, new = rows_b[k], rows_a[k]
        if old != new:
            cols = [c for c in sorted(old.keys() | new.keys()) if old.get(c) != new.get(c)]
            diff.changed.append(
                RowChange(key=dict(zip(key_names, k, strict=True)), before=old, after=new, columns=cols)
            )
    return diff


def diff_tables(
    before: sqlite3.Connection,
    after: sqlite3.Connection,
    tables: list[str],
    *,
    before_image: bytes | None = None,
) -> StateDiff:
    """The diff restricted to `tables` (a table missing on one side counts as empty there).

    `before_image` may pass `before`'s serialized image when the caller has it already.
    """
    before_tables = set(user_tables(before))
    after_tables = set(user_tables(after))
    out: dict[str, TableDiff] = {}
    pair: sqlite3.Connection | None = None
    try:
        for table in tables:
            cols = _columns(after, table) if table in after_tables else []
            if table in before_tables and table in after_tables and cols == _columns(before, table):
                if pair is None:
                    pair = _pair(
                        before_image if before_image is not None else to_image(before), to_image(after)
                    )
                diff = _set_diff(pair, table, _key_columns(after, table), cols)
            else:  # the table exists on one side only, or its columns changed: compare in Python
                keys_b, rows_b = _rows_by_key(before, table) if table in before_tables else ([], {})
                keys_a, rows_a = _rows_by_key(after, table) if table in after_tables else ([], {})
                diff = _table_diff(keys_a or keys_b, rows_b, rows_a)
            if not diff.empty:
                out[table] = diff
    finally:
        if pair is not None:
            pair.close()
    return StateDiff(tables=out)


def schema_rows(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """`sqlite_master` as (type, name, table, root page, sql) rows: the schema and where it lives."""
    return conn.execute(
        "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master ORDER BY name"
    ).fetchall()


def page_owners(conn: sqlite3.Connection) -> dict[int, str] | None:
    """Which table owns each page (index pages count for their table); None without `dbstat`."""
    try:
        pages = conn.execute("SELECT name, pageno FROM dbstat").fetchall()
    except sqlite3.OperationalError:  # SQLite built without SQLITE_ENABLE_DBSTAT_VTAB
        return None
    table_of = {name: table for _, name, table, _, _ in schema_rows(conn)}
    return {pageno: table_of.get(name, name) for name, pageno in pages}


def changed_tables(
    initial_image: bytes,
    final_image: bytes,
    owners: dict[int, str],
) -> set[str]:
    """The tables whose content may differ between two images of the same schema layout.

    Any change to a b-tree rewrites at least one page that already belonged to it (its root, or
    an existing page on the path to a new one), so the owners, in the initial state, of the pages
    that differ cover every changed table. Only valid when `sqlite_master` (names and root pages)
    is identical in both states: the caller checks that.
    """
    size = int.from_bytes(initial_image[16:18], "big")
    size = 65536 if size == 1 else size
    out: set[str] = set()
    # bytes slices, not memoryviews: memoryview equality compares item by item in Python's C loop
    # with struct unpacking, bytes equality is a memcmp.
    for start in range(0, min(len(initial_image), len(final_image)), size):
        if initial_image[start : start + size] != final_image[start : start + size]:
            owner = owners.get(start // size + 1)
            if owner is not None and not owner.startswith("sqlite_"):
                out.add(owner)
    return out


def diff_states(before: sqlite3.Connection, after: sqlite3.Connection) -> StateDiff:
    """Rows added, removed and changed per table between two states."""
    tables = sorted(set(user_tables(before)) | set(user_tables(after)))
    return diff_tables(before, after, tables)


def states_equal(a: sqlite3.Connection, b: sqlite3.Connection) -> bool:
    """True when both states hold the same tables and rows (the tau2-style state match)."""
    return diff_states(a, b).empty
