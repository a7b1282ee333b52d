"""State diffs: rows added, removed and changed per table, keyed by primary key or rowid."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from arena.env.loader import load_environment
from arena.env.runtime import Environment
from arena.env.state import connect_memory, copy_state, diff_states, from_image, to_image


def test_diff_of_an_episode(shop: Environment) -> None:
    inst = shop.new_instance()
    assert inst.diff().empty
    inst.call_sync("place_order", {"product_id": "P-200", "quantity": 2})
    inst.call_sync("cancel_order", {"order_id": "ORD-1002"})
    diff = inst.diff()
    assert diff.counts() == {
        "audit_log": {"added": 2, "removed": 0, "changed": 0},
        "orders": {"added": 1, "removed": 0, "changed": 1},
        "products": {"added": 0, "removed": 0, "changed": 1},
    }
    orders = diff.tables["orders"]
    assert orders.key == ["order_id"] and orders.added[0]["order_id"] == "ORD-N0001"
    change = orders.changed[0]
    assert change.key == {"order_id": "ORD-1002"} and change.columns == ["status", "updated_at"]
    assert (change.before["status"], change.after["status"]) == ("placed", "cancelled")
    # P-200: 2 in stock, 2 ordered, 1 returned by the cancellation.
    assert diff.tables["products"].changed[0].after["stock"] == 1
    assert diff.tables["audit_log"].key == ["rowid"]


def test_removed_rows_composite_keys_and_table_changes() -> None:
    a = connect_memory()
    a.executescript(
        "CREATE TABLE m (x INTEGER, y TEXT, v REAL, PRIMARY KEY (y, x));"
        "INSERT INTO m VALUES (1, 'a', 1.0), (2, 'a', 2.0), (1, 'b', 3.0);"
        "CREATE TABLE gone (n INTEGER);"
        "INSERT INTO gone VALUES (5);"
    )
    b = copy_state(a)
    b.executescript(
        "DELETE FROM m WHERE x = 2; UPDATE m SET v = 9 WHERE y = 'b';"
        "DROP TABLE gone; CREATE TABLE fresh (k TEXT PRIMARY KEY); INSERT INTO fresh VALUES ('z');"
    )
    diff = diff_states(a, b)
    m = diff.tables["m"]
    assert m.key == ["y", "x"]
    assert m.removed == [{"x": 2, "y": "a", "v": 2.0}]
    assert m.changed[0].key == {"y": "b", "x": 1} and m.changed[0].columns == ["v"]
    assert diff.tables["gone"].removed == [{"n": 5}]
    assert diff.tables["fresh"].added == [{"k": "z"}]
    assert diff_states(b, b).empty


def test_images_round_trip() -> None:
    a = connect_memory()
    a.executescript("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'x');")
    b = from_image(to_image(a))
    assert diff_states(a, b).empty
    b.execute("INSERT INTO t VALUES (2, 'y')")
    assert a.execute("SELECT count(*) FROM t").fetchone() == (1,)


def _big_env(folder: Path) -> Environment:
    (folder / "schema.sql").write_text(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT NOT NULL, qty INTEGER NOT NULL);\n"
        "CREATE TABLE pairs (a TEXT, b INTEGER, note TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID;\n"
        "CREATE TABLE log (line TEXT);\n"
        "CREATE INDEX items_label ON items (label);\n"
    )
    (folder / "seed.sql").write_text(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)\n"
        "INSERT INTO items SELECT i, 'item ' || i || printf('%.40c', 'x'), i % 7 FROM n;\n"
        "INSERT INTO pairs VALUES ('x', 1, 'one'), ('x', 2, NULL);\n"
    )
    (folder / "tools.py").write_text(
        '''"""Bulk tools for the diff tests."""

from arena.env import Db, tool


@tool(writes=True)
def mutate(db: Db, op: str, n: int) -> int:
    """Change rows in bulk.

    Args:
        op: One of insert, update, delete, pair, log.
        n: A row number.
    """
    if op == "insert":
        return db.execute("INSERT INTO items (label, qty) VALUES (?, ?)", "new " + "y" * (n % 500), n)
    if op == "update":
        return db.execute("UPDATE items SET qty = qty + 1, label = label || 'z' WHERE id % 97 = ?", n % 97)
    if op == "delete":
        return db.execute("DELETE FROM items WHERE id BETWEEN ? AND ?", n, n + 40)
    if op == "pair":
        return db.execute("INSERT OR REPLACE INTO pairs VALUES ('y', ?, 'p')", n)
    return db.execute("INSERT INTO log VALUES (?)", f"line {n}")
'''
    )
    (folder / "tests.toml").write_text('[[case]]\ntool = "mutate"\nargs = { op = "log", n = 1 }\n')
    return load_environment(folder)


def test_page_guided_diff_equals_the_full_diff(env_copy: Callable[[str], Path]) -> None:
    env = _big_env(env_copy("good/gate"))
    rng = random.Random(7)
    ops = ["insert", "update", "delete", "pair", "log"]
    for _ in range(12):
        inst = env.new_instance()
        for _ in range(rng.randint(1, 6)):
            assert inst.call_sync("mutate", {"op": rng.choice(ops), "n": rng.randint(1, 3000)}).ok
        fast = inst.diff()
        assert fast == diff_states(inst.initial, inst.db.connection)
        assert not fast.empty
        inst.close()
