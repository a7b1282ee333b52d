"""`state_match`'s comparison of two database states, row by row, fast enough for the gates.

Rows are compared as multisets per table, so row order (and the rowids of tables with a key) do
not matter. Both states go into one SQLite connection (`main` and `expected`) so that the work is
set queries in C rather than Python loops over rows: the adversary gate compares a handful of
states per synthesized task, and bundled environments hold thousands of rows. Tables that hold
duplicate rows fall back to counting rows in Python, since EXCEPT compares sets.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from typing import Any

from arena.env.state import changed_tables, schema_rows, to_image, user_tables

# An environment template's (image, schema rows, page owners): `Environment.template_layout()`.
Layout = tuple[bytes, list[Any], dict[int, str] | None]


def template_layout_of(instance: Any) -> Layout | None:
    """The layout of the template an instance started from, when its initial state is that template."""
    env = getattr(instance, "env", None)
    template = getattr(env, "template", None)
    if template is None or getattr(instance, "initial", None) is not template:
        return None
    return env.template_layout()  # type: ignore[no-any-return, union-attr]


def _touched_tables(base: Layout, *states: sqlite3.Connection) -> set[str] | None:
    """Tables that may differ from `base` in any of `states` (None: cannot tell).

    Both sides of a state comparison descend from one environment template; a table that none of
    them changed is identical on both (`arena.env.state.changed_tables`).
    """
    base_image, base_schema, owners = base
    if owners is None or any(schema_rows(state) != base_schema for state in states):
        return None
    return set().union(*(changed_tables(base_image, to_image(state), owners) for state in states))


def _pair(actual: sqlite3.Connection, expected: sqlite3.Connection) -> sqlite3.Connection:
    """One connection holding `actual` as `main` and `expected` as `expected`."""
    pair = sqlite3.connect(":memory:")
    pair.deserialize(to_image(actual))
    pair.execute("ATTACH DATABASE ':memory:' AS expected")
    pair.deserialize(to_image(expected), name="expected")
    return pair


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _columns(pair: sqlite3.Connection, schema: str, table: str, skip: set[str]) -> list[str]:
    return [r[1] for r in pair.execute(f'PRAGMA {schema}.table_info("{table}")') if r[1] not in skip]


def _key(pair: sqlite3.Connection, table: str, cols: list[str]) -> list[str]:
    """The declared primary key, when both sides share it and it is among `cols` ([]: none usable)."""
    keys = [
        [r[1] for r in pair.execute(f'PRAGMA {s}.table_info("{table}")') if r[5]]
        for s in ("main", "expected")
    ]
    return keys[0] if keys[0] and keys[0] == keys[1] and all(k in cols for k in keys[0]) else []


def _unmatched(side: str, other: str, keys: list[str], cols: list[str]) -> str:
    """Rows of `side` that `other` lacks or holds with other values (tables keyed by `keys`)."""
    on = " AND ".join(f'o."{k}" = s."{k}"' for k in keys)
    differs = " OR ".join(f'o."{c}" IS NOT s."{c}"' for c in cols)
    select = ", ".join(f's."{c}"' for c in cols)
    return (
        f'SELECT {select} FROM {side} s LEFT JOIN {other} o ON {on} WHERE o."{keys[0]}" IS NULL OR {differs}'
    )


def _counted(pair: sqlite3.Connection, source: str, select: str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row) for row in pair.execute(f"SELECT {select} FROM {source}"))


def _table_problem(pair: sqlite3.Connection, table: str, skip: set[str]) -> str | None:
    """None when `table` holds the same rows in `main` and `expected`; else one line saying how not."""
    cols = _columns(pair, "main", table, skip)
    if cols != _columns(pair, "expected", table, skip):
        return f"{table}: columns differ"
    select = ", ".join(f'"{c}"' for c in cols) or "1"
    got, want = f'main."{table}"', f'expected."{table}"'
    keys = _key(pair, table, cols)
    if keys:
        # Rows are unique by key on both sides: join on it (the key's index does the work) and
        # count the rows of each side without an identical partner.
        missing_sql, extra_sql = _unmatched(want, got, keys, cols), _unmatched(got, want, keys, cols)
        distinct = True
    else:
        missing_sql = f"SELECT {select} FROM {want} EXCEPT SELECT {select} FROM {got}"
        extra_sql = f"SELECT {select} FROM {got} EXCEPT SELECT {select} FROM {want}"
        n_got, n_want, distinct_got, distinct_want = pair.execute(
            f"SELECT (SELECT count(*) FROM {got}), (SELECT count(*) FROM {want}),"
            f" (SELECT count(*) FROM (SELECT DISTINCT {select} FROM {got})),"
            f" (SELECT count(*) FROM (SELECT DISTINCT {select} FROM {want}))"
        ).fetchone()
        distinct = n_got == distinct_got and n_want == distinct_want
    if distinct:
        # No duplicate rows: set differences are multiset differences.
        n_missing = pair.execute(f"SELECT count(*) FROM ({missing_sql})").fetchone()[0]
        n_extra = pair.execute(f"SELECT count(*) FROM ({extra_sql})").fetchone()[0]
        if not n_missing and not n_extra:
            return None
        example_sql = missing_sql if n_missing else extra_sql
        row = tuple(pair.execute(f"SELECT * FROM ({example_sql}) ORDER BY 1 LIMIT 1").fetchone())
    else:
        have, need = _counted(pair, got, select), _counted(pair, want, select)
        missing, extra = need - have, have - need
        if not missing and not extra:
            return None
        n_missing, n_extra = sum(missing.values()), sum(extra.values())
        row = min(missing, key=repr) if missing else min(extra, key=repr)
    example = f"{'missing' if n_missing else 'unexpected'} {_short(repr(row))}"
    return f"{table}: {n_missing} row(s) missing, {n_extra} unexpected, e.g. {example}"


def compare_states(
    actual: sqlite3.Connection,
    expected: sqlite3.Connection,
    ignore: Sequence[str] = (),
    *,
    base: Layout | None = None,
) -> str | None:
    """None when every table (minus `ignore`d tables/`table.column`s) holds the same rows; else why not.

    `base`, the layout of the template both states come from, lets untouched tables be skipped.
    """
    skip_tables = {i for i in ignore if "." not in i}
    skip_cols: dict[str, set[str]] = {}
    for item in ignore:
        if "." in item:
            table, col = item.split(".", 1)
            skip_cols.setdefault(table, set()).add(col)
    problems: list[str] = []
    got_tables, want_tables = set(user_tables(actual)) - skip_tables, set(user_tables(expected)) - skip_tables
    for table in sorted(got_tables ^ want_tables):
        problems.append(f"table {table} {'unexpected' if table in got_tables else 'missing'}")
    shared = sorted(got_tables & want_tables)
    touched = _touched_tables(base, actual, expected) if base is not None else None
    if touched is not None:
        shared = [t for t in shared if t in touched]
    pair = _pair(actual, expected)
    try:
        problems += [p for t in shared if (p := _table_problem(pair, t, skip_cols.get(t, set()))) is not None]
    finally:
        pair.close()
    if not problems:
        return None
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more
