"""A τ² domain's database as SQLite documents, and how the ported tools are called.

τ²'s tools read and write nested records (an order with its items and payments, a reservation with
its flights and passengers) and answer with the record as its pydantic model dumps it. Arena's port
keeps each record as one JSON document in a table per collection (retail: `users`, `products`,
`orders`; airline: `flights`, `users`, `reservations`), keyed and ordered as τ²'s dictionaries are,
so a record's dump is the stored text and the tools' results are τ²'s text.

Why SQLite documents rather than τ²'s pydantic objects: a reset copies an in-memory template with
SQLite's backup API (no parsing, no validation: τ² rebuilds its pydantic database from JSON every
reset), and a write tool runs inside a savepoint, so a failed call leaves nothing behind. Every
written key is recorded: the end state of an episode is compared with another on the keys either
wrote, which equals comparing the whole databases (every other document is the template's in both)
at a fraction of the cost.

A ported tool is a function `fn(store, **arguments)` marked with `ported_tool`; `call_tool` runs
one and renders its result as τ²'s environment renders one (`Environment.to_json_str`): a string
as is, a record (`Record`, a model's dump) as its JSON, containers element by element with scalars
turned into strings, and a refusal as `Error: <message>`.
"""

from __future__ import annotations

import inspect
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

_PORTED_ATTR = "__tau2_ported__"
# Backups read the template; one template serves every copy, possibly from several threads.
_COPY_LOCK = threading.Lock()

Normalizer = Callable[[str, str, dict[str, Any]], dict[str, Any]]
# What τ²'s tools raise on odd arguments, reported to the agent as τ² reports them; anything else
# is a defect of the port and propagates.
PYTHON_FAILURES: tuple[type[Exception], ...] = (
    ArithmeticError,
    AttributeError,
    LookupError,
    RecursionError,
    SyntaxError,
    TypeError,
    ValueError,
)


class Tau2ToolError(Exception):
    """A tool's refusal; the agent reads `Error: <message>`, as τ²'s tools' exceptions read."""


class Record(dict):  # type: ignore[type-arg]
    """A pydantic model's dump: rendered as it is (τ² does not stringify a model's numbers)."""


class DocStore:
    """One state of a domain's database: a table of JSON documents per collection."""

    def __init__(self, conn: sqlite3.Connection, collections: list[str]) -> None:
        self._conn = conn
        self.collections = list(collections)
        self.written: set[tuple[str, str]] = set()

    @classmethod
    def from_data(cls, data: dict[str, dict[str, Any]], normalize: Normalizer | None = None) -> DocStore:
        """A template from τ²'s `db.json` shape: `{collection: {key: record}}`, in the file's order."""
        conn = _connect()
        for collection, records in data.items():
            if not isinstance(records, dict):
                raise ValueError(f"collection {collection!r} is not an object of records")
            _create(conn, collection)
            rows = (
                (str(key), json.dumps(normalize(collection, str(key), doc) if normalize else doc))
                for key, doc in records.items()
            )
            conn.executemany(f'INSERT INTO "{collection}" (key, doc) VALUES (?, ?)', rows)
        return cls(conn, list(data))

    def copy(self) -> DocStore:
        """An independent copy (the reset of an episode); nothing counts as written in it."""
        target = _connect()
        with _COPY_LOCK:
            self._conn.backup(target)
        return DocStore(target, self.collections)

    def close(self) -> None:
        """Release the connection."""
        self._conn.close()

    def _table(self, collection: str) -> str:
        if collection not in self.collections:
            raise KeyError(f"no collection {collection!r} (have {', '.join(self.collections)})")
        return collection

    def get(self, collection: str, key: str) -> dict[str, Any] | None:
        """The document at `key` (a fresh dict the caller may change), or None."""
        row = self._conn.execute(
            f'SELECT doc FROM "{self._table(collection)}" WHERE key = ?', (str(key),)
        ).fetchone()
        return None if row is None else json.loads(row[0])

    def has(self, collection: str, key: str) -> bool:
        """Whether `key` exists in `collection`."""
        sql = f'SELECT 1 FROM "{self._table(collection)}" WHERE key = ?'
        return self._conn.execute(sql, (str(key),)).fetchone() is not None

    def put(self, collection: str, key: str, doc: dict[str, Any]) -> None:
        """Write a document; a new key goes last, an existing one keeps its place (as a dict's)."""
        self._conn.execute(
            f'INSERT INTO "{self._table(collection)}" (key, doc) VALUES (?, ?) '
            "ON CONFLICT(key) DO UPDATE SET doc = excluded.doc",
            (str(key), json.dumps(doc)),
        )
        self.written.add((collection, str(key)))

    def keys(self, collection: str) -> list[str]:
        """The keys of a collection, in insertion order."""
        sql = f'SELECT key FROM "{self._table(collection)}" ORDER BY rowid'
        return [r[0] for r in self._conn.execute(sql)]

    def items(self, collection: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """`(key, document)` pairs in insertion order."""
        sql = f'SELECT key, doc FROM "{self._table(collection)}" ORDER BY rowid'
        for key, doc in self._conn.execute(sql):
            yield key, json.loads(doc)

    def raw(self, collection: str, key: str) -> str | None:
        """The stored JSON text of a document (for comparisons without parsing)."""
        sql = f'SELECT doc FROM "{self._table(collection)}" WHERE key = ?'
        row = self._conn.execute(sql, (str(key),)).fetchone()
        return None if row is None else row[0]

    def dump(self) -> dict[str, dict[str, Any]]:
        """The whole database in τ²'s `db.json` shape."""
        return {c: dict(self.items(c)) for c in self.collections}

    def canonical_json(self) -> str:
        """The database as canonical JSON (sorted keys, no spaces): equal states, equal text."""
        return json.dumps(self.dump(), sort_keys=True, separators=(",", ":"))

    def savepoint(self) -> _Savepoint:
        """A context in which a failure undoes every write (and forgets the written keys)."""
        return _Savepoint(self)


class _Savepoint:
    def __init__(self, store: DocStore) -> None:
        self._store = store
        self._written: set[tuple[str, str]] = set()

    def __enter__(self) -> None:
        self._written = set(self._store.written)
        self._store._conn.execute("SAVEPOINT tool_call")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        conn = self._store._conn
        if exc_type is not None:
            conn.execute("ROLLBACK TO tool_call")
            self._store.written = self._written
        conn.execute("RELEASE tool_call")


def same_end_state(a: DocStore, b: DocStore) -> bool:
    """Whether two states of one template are equal, compared on the keys either wrote."""
    for collection, key in a.written | b.written:
        if _canonical(a.raw(collection, key)) != _canonical(b.raw(collection, key)):
            return False
    return True


def _canonical(text: str | None) -> str | None:
    return None if text is None else json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def _connect() -> sqlite3.Connection:
    return sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)


def _create(conn: sqlite3.Connection, collection: str) -> None:
    if not collection.isidentifier():
        raise ValueError(f"collection name {collection!r} is not an identifier")
    conn.execute(f'CREATE TABLE "{collection}" (key TEXT PRIMARY KEY, doc TEXT NOT NULL)')


# --- the ported tools --------------------------------------------------------------------------


@dataclass(frozen=True)
class PortedTool:
    """A τ² tool re-implemented over a `DocStore`; `writes` as τ²'s `mutates_state`.

    `toolkit` is the τ² class the tool is a method of (`RetailTools`): Python names it in the
    message about a call's missing or unexpected arguments, which the agent reads.
    """

    name: str
    fn: Callable[..., Any]
    writes: bool
    toolkit: str = ""


def ported_tool(*, writes: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function `fn(store, **arguments)` as the port of the τ² tool of the same name."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, _PORTED_ATTR, writes)
        return fn

    return mark


def collect_tools(module: ModuleType) -> dict[str, PortedTool]:
    """The ported tools a domain module defines, by name (its `TOOLKIT` names their τ² class)."""
    toolkit = str(getattr(module, "TOOLKIT", ""))
    tools: dict[str, PortedTool] = {}
    for name, value in vars(module).items():
        if callable(value) and hasattr(value, _PORTED_ATTR):
            writes = bool(getattr(value, _PORTED_ATTR))
            tools[name] = PortedTool(name=name, fn=value, writes=writes, toolkit=toolkit)
    return tools


class CallOutcome(BaseModel):
    """A tool call's result as the agent reads it (τ²'s tool message content and error flag)."""

    content: str
    error: bool = False


def call_tool(
    tools: dict[str, PortedTool], store: DocStore, name: str, arguments: dict[str, Any]
) -> CallOutcome:
    """Run one call; a refusal, an unknown tool or arguments the tool does not take are errors."""
    tool = tools.get(name)
    if tool is None:
        return CallOutcome(content=f"Error: Tool '{name}' not found.", error=True)
    if not isinstance(arguments, dict):
        return CallOutcome(content=f"Error: the arguments of {name} must be an object", error=True)
    try:
        inspect.signature(tool.fn).bind(store, **arguments)
    except TypeError:
        return CallOutcome(content=f"Error: {_argument_fault(tool, store, arguments)}", error=True)
    try:
        with store.savepoint():
            result = tool.fn(store, **arguments)
    except (Tau2ToolError, *PYTHON_FAILURES) as exc:
        # τ²'s environment answers any exception of a tool as `Error: <exception>`; what τ²'s code
        # raises on odd arguments (a wrong type, a missing key) is Python's, so the port lets
        # Python raise the same and reports it the same way.
        return CallOutcome(content=f"Error: {exc}", error=True)
    return CallOutcome(content=render(result))


def _argument_fault(tool: PortedTool, store: DocStore, arguments: dict[str, Any]) -> str:
    """Python's own message about the call's arguments, with τ²'s class in the name."""
    try:
        tool.fn(store, **arguments)  # fails binding, before the tool's body runs
    except TypeError as exc:
        text = str(exc)
        return f"{tool.toolkit}.{text}" if tool.toolkit and text.startswith(f"{tool.name}()") else text
    raise AssertionError("unreachable: the arguments did not bind")  # pragma: no cover


def render(result: Any) -> str:
    """A result as τ²'s environment turns one into a tool message's text."""
    if isinstance(result, str):
        return result
    return json.dumps(_plain(result), default=str)


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return dict(value)
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    raise TypeError(f"a tool returned a {type(value).__name__}, which τ² does not render")
