"""Where argument values come from: the seed database, real tool outputs, and typed generators.

Synthesized calls must use values that exist and belong to the user (EnvFactory's "valid
parameters"): ids observed in the outputs of read tools run on the seed database first (those are
scoped to the logged-in user by the tools themselves), then same-named columns of the database
(filtered to the user when the table has a `user_id` column), and only then generated values
(enums, ranges and examples parsed from the docstring, dates relative to the environment's `now`).
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from arena.env.state import user_tables

# Suffixes that make a field an identifier: such fields may feed a parameter whose name only ends
# with them (`from_account_id` <- `account_id`, `new_sku` <- `sku`).
_ID_SUFFIXES = ("_id", "id", "sku", "email", "_no", "_number", "_code")
_MAX_POOL = 200

_PHRASES: dict[str, list[str]] = {
    "reason": ["changed my mind", "ordered by mistake", "plans changed", "found a better option"],
    "comment": ["Great service, thanks!", "Arrived a bit late but fine.", "Would use again."],
    "body": ["Thanks, see you then.", "Could you send me the details?", "Sounds good to me."],
    "note": ["Please ring the bell.", "No rush on this one.", "Call me when ready."],
    "memo": ["rent share", "dinner split", "birthday gift"],
    "title": ["Planning sync", "Quarterly review", "Follow-up notes"],
    "subject": ["Quick question", "Meeting notes", "Schedule update"],
    "name": ["Alex Morgan", "Jordan Lee", "Sam Rivera"],
    "label": ["Gym", "Studio", "Cabin"],
    "description": ["Details to follow.", "See the attached notes.", "Short summary of the plan."],
    "request": ["late check-in please", "quiet room if possible", "extra pillows"],
    "instruction": ["leave at the door", "call on arrival", "use the side entrance"],
    "query": ["a", "e"],
    "street": ["12 Harbor Way", "480 Elm St Apt 3", "77 Ridge Rd"],
    "city": ["Seattle", "Portland"],
    "zip": ["98101", "98109", "98115"],
    "color": ["blue", "green", "red"],
}


def singular(name: str) -> str:
    """`message_ids` -> `message_id`, `categories` -> `category` (good enough for field names)."""
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss") and len(name) > 3:
        return name[:-1]
    return name


def is_id_like(name: str) -> bool:
    """Whether a field name names an identifier (ids, skus, emails, numbers, codes)."""
    return name.endswith(_ID_SUFFIXES)


def param_keys(param: str) -> list[str]:
    """The field names that can feed `param`, most specific first.

    The parameter itself and its singular, then id-like suffixes (`pickup_branch_id` ->
    `branch_id`); a bare `id` or a non-id suffix (`passenger_name` -> `name`) is too generic.
    """
    keys: list[str] = []
    for base in dict.fromkeys([param, singular(param)]):
        keys.append(base)
        parts = base.split("_")
        for i in range(1, len(parts)):
            tail = "_".join(parts[i:])
            if tail != "id" and is_id_like(tail) and (("_" in tail) or tail in ("sku", "email")):
                keys.append(tail)
    return list(dict.fromkeys(keys))


def iter_fields(value: Any, *, limit: int = 60) -> Iterator[tuple[str, Any]]:
    """Every (field name, scalar value) pair of a JSON value; list elements share their key."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict):
                yield from iter_fields(item, limit=limit)
            elif isinstance(item, list):
                for element in item[:limit]:
                    if isinstance(element, dict | list):
                        yield from iter_fields(element, limit=limit)
                    elif element is not None:
                        yield singular(str(key)), element
                        yield str(key), element
            elif item is not None:
                yield str(key), item
    elif isinstance(value, list):
        for element in value[:limit]:
            yield from iter_fields(element, limit=limit)


class ValuePools:
    """Observed values per field name: from tool outputs (user-scoped) and from the database."""

    def __init__(self) -> None:
        self.observed: dict[str, list[Any]] = {}
        self.database: dict[str, list[Any]] = {}

    def observe(self, output: Any) -> None:
        """Add every scalar field of a tool output."""
        for key, value in iter_fields(output):
            pool = self.observed.setdefault(key, [])
            if len(pool) < _MAX_POOL and value not in pool:
                pool.append(value)

    def load_database(self, conn: sqlite3.Connection, user_id: int | str) -> None:
        """Distinct values of every column; tables with a `user_id` column only give the user's rows."""
        for table in user_tables(conn, by_name=False):
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            where, params = ("", ())
            if "user_id" in cols:
                where, params = (" WHERE user_id = ?", (user_id,))
            for col in cols:
                rows = conn.execute(
                    f'SELECT DISTINCT "{col}" FROM "{table}"{where} LIMIT {_MAX_POOL}', params
                ).fetchall()
                pool = self.database.setdefault(col, [])
                for (value,) in rows:
                    if value is not None and value not in pool:
                        pool.append(value)

    def candidates(self, param: str) -> tuple[list[Any], list[Any]]:
        """(observed, database) values for a parameter, matched through `param_keys`."""
        observed: list[Any] = []
        database: list[Any] = []
        for key in param_keys(param):
            observed.extend(v for v in self.observed.get(key, []) if v not in observed)
            database.extend(v for v in self.database.get(key, []) if v not in database)
        return observed, database


def resolve_schema(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Follow `$ref` and take the non-null branch of `anyOf` (Optional[...] parameters)."""
    for _ in range(8):
        if "$ref" in schema:
            schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
            continue
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            non_null = [b for b in branches if b.get("type") != "null"]
            schema = {**{k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}, **non_null[0]}
            continue
        break
    return schema


def coerce(value: Any, schema: dict[str, Any]) -> Any:
    """`value` as the schema's type, or None when it cannot be (a bool is never a number here)."""
    kind = schema.get("type")
    try:
        if kind == "string":
            return value if isinstance(value, str) else (None if isinstance(value, bool) else str(value))
        if kind == "integer":
            if isinstance(value, bool):
                return None
            if isinstance(value, int):
                return value
            if isinstance(value, float) and value.is_integer():
                return int(value)
            return int(value) if isinstance(value, str) and value.isdigit() else None
        if kind == "number":
            if isinstance(value, bool):
                return None
            return float(value) if isinstance(value, int | float) else None
        if kind == "boolean":
            return bool(value) if isinstance(value, bool | int) else None
    except (TypeError, ValueError):
        return None
    return value


_RANGE_RE = re.compile(r"(?:between\s+)?(-?\d+(?:\.\d+)?)\s*(?:to|and|-)\s*(-?\d+(?:\.\d+)?)")
_EXAMPLE_RE = re.compile(r'e\.g\.\s*"([^"]+)"')
_DATE_WORDS = ("date", "start", "end", "check_in", "check_out", "due", "day", "from", "until")


def looks_temporal(name: str, description: str) -> str | None:
    """`"date"`, `"datetime"` or None, from the parameter's name and description."""
    text = description.lower()
    if "yyyy-mm-ddthh" in text or ("iso" in text and "time" in text) or "datetime" in text:
        return "datetime"
    if "yyyy-mm-dd" in text or "date" in name:
        return "date"
    if name in ("start", "end") or name.endswith(("_start", "_end")):
        return "datetime"
    if any(w in name for w in _DATE_WORDS) and ("date" in text or "day" in text):
        return "date"
    return None


def generate(name: str, schema: dict[str, Any], description: str, rng: random.Random, now: str) -> Any:
    """A plausible value for a parameter with no observed candidates."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        lo, hi = 1.0, 5.0 if kind == "integer" else 60.0
        m = _RANGE_RE.search(description)
        if m:
            lo, hi = sorted((float(m.group(1)), float(m.group(2))))
        lo = max(lo, float(schema.get("minimum", lo)))
        hi = min(hi, float(schema.get("maximum", hi)))
        if kind == "integer":
            return rng.randint(int(lo), max(int(lo), int(hi)))
        return round(rng.uniform(lo, hi), 2)
    if kind == "string":
        temporal = looks_temporal(name, description)
        if temporal:
            base = datetime.fromisoformat(now) + timedelta(days=rng.randint(1, 21))
            if temporal == "date":
                return base.date().isoformat()
            return base.replace(hour=rng.randint(9, 16), minute=0, second=0).isoformat(timespec="seconds")
        m = _EXAMPLE_RE.search(description)
        if m and rng.random() < 0.6:
            return m.group(1)
        for word, phrases in _PHRASES.items():
            if word in name:
                return rng.choice(phrases)
        return rng.choice(_PHRASES["description"])
    return None


def fix_time_pairs(args: dict[str, Any], rng: random.Random) -> None:
    """Make an end come after its start (`start`/`end`, `check_in`/`check_out`, ...), in place."""
    pairs = [("start", "end"), ("check_in", "check_out"), ("start_date", "end_date")]
    for a_key in list(args):
        for start, end in pairs:
            if not a_key.endswith(start):
                continue
            b_key = a_key[: len(a_key) - len(start)] + end
            a, b = args.get(a_key), args.get(b_key)
            if not isinstance(a, str) or not isinstance(b, str):
                continue
            try:
                ta = datetime.fromisoformat(a)
            except ValueError:
                continue
            if b > a and len(b) == len(a):
                continue
            if "T" in a:
                args[b_key] = (ta + timedelta(hours=rng.choice([1, 1, 2]))).isoformat(timespec="seconds")
            else:
                args[b_key] = (ta + timedelta(days=rng.randint(1, 4))).date().isoformat()
