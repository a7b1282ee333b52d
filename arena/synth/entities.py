"""How a user names a database row instead of quoting its id.

`ORD-1002` becomes 'the order "Weekly groceries"', or 'the order with restaurant Luigi's and dated
2025-05-30': attributes added until they single out the row. The task writers use it at ambiguity
1 and above, so the agent has to look the id up.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from arena.env.state import user_tables
from arena.synth.values import is_id_like, singular

_NAME_COLS = ("name", "title", "label", "subject", "full_name", "brand", "nickname")
_DATE_COLS = ("created_at", "date", "start", "check_in", "placed_at", "due_date", "sent_at", "start_date")


def humanize(name: str) -> str:
    """`payment_method_id` -> `payment method`, `rx_id` -> `rx`."""
    base = re.sub(r"_(id|ids)$", "", name)
    return base.replace("_", " ").strip() or name


class EntityIndex:
    """Rows by their single-column primary key value, to describe an id the way a user would."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.rows: dict[str, tuple[str, dict[str, Any]]] = {}
        self.tables: dict[str, list[dict[str, Any]]] = {}
        for table in user_tables(conn, by_name=False):
            info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            pks = [r[1] for r in info if r[5]]
            if len(pks) != 1:
                continue
            cur = conn.execute(f'SELECT * FROM "{table}" LIMIT 2000')
            cols = [d[0] for d in cur.description]
            for row in cur.fetchall():
                record = dict(zip(cols, row, strict=True))
                key = record[pks[0]]
                self.tables.setdefault(table, []).append(record)
                if isinstance(key, str):
                    self.rows.setdefault(key, (table, record))

    def _name_of(self, record: dict[str, Any]) -> str | None:
        for col in _NAME_COLS:
            value = record.get(col)
            if isinstance(value, str) and 0 < len(value) <= 60:
                return value
        # Public codes (a flight number, an ISBN) name a thing the way users do.
        for col, value in record.items():
            if col.endswith(("_number", "_code", "_no", "isbn")) and isinstance(value, str) and value:
                return value
        return None

    @staticmethod
    def _date_of(record: dict[str, Any]) -> str | None:
        for col in (*_DATE_COLS, *record):
            value = record.get(col)
            dated = col in _DATE_COLS or (col.endswith(("_at", "_date", "_on")) and col != "updated_at")
            if dated and isinstance(value, str) and len(value) >= 10 and value[4:5] == "-":
                return value[:16].replace("T", " ")
        return None

    def describe(self, value: Any) -> str | None:
        """'the order from Luigi's (created 2025-05-30)' for 'ORD-1002', or None."""
        if not isinstance(value, str) or value not in self.rows:
            return None
        table, record = self.rows[value]
        noun = humanize(singular(table))
        name = self._name_of(record)
        if (
            name
            and name != value
            and self._unique(table, record, [c for c in _NAME_COLS if record.get(c) == name][:1])
        ):
            return f'the {noun} "{name}"'
        # Attributes a user would mention, added until they single out this row.
        parts: list[tuple[str, str]] = []
        for col, ref in record.items():
            if col.endswith("_id") and col != "user_id" and isinstance(ref, str) and ref in self.rows:
                ref_name = self._name_of(self.rows[ref][1])
                if ref_name:
                    parts.append((col, f"{humanize(col)} {ref_name}"))
                    break
        date = self._date_of(record)
        if date:
            date_col = next(
                c for c, v in record.items() if isinstance(v, str) and v[:16].replace("T", " ") == date
            )
            parts.append((date_col, f"dated {date}"))
        for col, v in record.items():
            if (
                isinstance(v, str)
                and 0 < len(v) <= 30
                and not is_id_like(col)
                and " " not in v
                and col not in dict(parts)
            ):
                parts.append((col, f"{humanize(col)} {v}"))
        chosen: list[tuple[str, str]] = []
        for part in parts:
            chosen.append(part)
            if self._unique(table, record, [c for c, _ in chosen]):
                return f"the {noun} with {' and '.join(p for _, p in chosen)}"
        return None

    def _unique(self, table: str, record: dict[str, Any], cols: list[str]) -> bool:
        """Whether no other row of the table has the same values in `cols`."""
        if not cols:
            return False
        same = [r for r in self.tables.get(table, []) if all(r.get(c) == record.get(c) for c in cols)]
        return len(same) == 1


_INDEX: dict[str, EntityIndex] = {}


def entity_index(env: Any) -> EntityIndex:
    """The (cached) entity index of an environment version."""
    key = f"{env.path}:{env.version}"
    if key not in _INDEX:
        _INDEX[key] = EntityIndex(env.template)
    return _INDEX[key]
