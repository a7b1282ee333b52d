"""Grounded writes: a write's row identifiers count only if the episode showed them before the write.

Training environments keep one seed database, so a policy can learn `transfer_funds(payee_id=
"PAY-102")` by heart and skip the look-up that every other database needs. This module extends
the provenance rule of answers (`arena.tasks.provenance`) to actions: an argument of a successful
write call whose value names a row — a value of a key column (a single-column primary key or
unique column: an id, a code, an email, a handle) in the initial or final state — is grounded
only when, before the call, the episode showed it to the agent

- in the user's words,
- in a tool result it received, not as an echo of that call's own arguments, or
- in the environment's rules, which the policy's system prompt includes.

A value the agent must work out rather than copy is listed in the task's `derived_args`; it is
grounded once the episode received a successful result of every read tool the reference calls
(as `derived` answer values are). Strings and integer arguments named like an id (`user_id=4`)
can name a row; other numbers, booleans and free text that matches no key cannot.

`ungrounded_writes` lists the offending calls; the reward formula pays nothing for an episode
with one (`arena.tasks.reward`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from typing import Any

from arena.tasks.model import Task
from arena.tasks.provenance import Observations, contains_identifier, identifier_pattern
from arena.tasks.transcript import ReplayTranscript
from arena.types import Message


def names_a_row_candidate(name: str, value: Any) -> bool:
    """Arguments that can name a row: strings (ids like "CARD-11"), or integers named like an id."""
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, int) and not isinstance(value, bool) and name.lower().endswith(("id", "ids"))


def argument_fields(arguments: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every (argument or field name, scalar value) of a call's arguments; list items share their key."""

    def walk(name: str, value: Any) -> Iterator[tuple[str, Any]]:
        if isinstance(value, dict):
            for key, item in value.items():
                yield from walk(str(key), item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(name, item)
        elif value is not None:
            yield name, value

    for key, value in arguments.items():
        yield from walk(str(key), value)


def _schema_of(conn: sqlite3.Connection, schema: str) -> tuple[str, ...]:
    rows = conn.execute(f"SELECT sql FROM {schema}.sqlite_master WHERE sql IS NOT NULL ORDER BY name")
    return tuple(r[0] for r in rows)


_KEYS_BY_SCHEMA: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}


def key_columns(conn: sqlite3.Connection, schema: str = "main") -> tuple[tuple[str, str], ...]:
    """(table, column) pairs whose values alone name one row, computed once per database schema.

    Single-column primary keys and single-column unique indexes: a column of a composite key
    (a seat number, a night of an availability calendar) names nothing by itself.
    """
    ddl = _schema_of(conn, schema)
    cached = _KEYS_BY_SCHEMA.get(ddl)
    if cached is not None:
        return cached
    found: list[tuple[str, str]] = []
    for table in _tables(conn, schema):
        info = conn.execute(f'PRAGMA {schema}.table_info("{table}")').fetchall()
        pk = [r[1] for r in info if r[5]]
        columns = {pk[0]} if len(pk) == 1 else set()
        for index in conn.execute(f'PRAGMA {schema}.index_list("{table}")').fetchall():
            if index[2]:  # unique
                names = [r[2] for r in conn.execute(f'PRAGMA {schema}.index_info("{index[1]}")')]
                if len(names) == 1 and names[0] is not None:
                    columns.add(names[0])
        found.extend((table, column) for column in sorted(columns))
    keys = tuple(found)
    if len(_KEYS_BY_SCHEMA) > 256:  # synthesized environments come and go; keep the cache small
        _KEYS_BY_SCHEMA.clear()
    _KEYS_BY_SCHEMA[ddl] = keys
    return keys


def _tables(conn: sqlite3.Connection, schema: str) -> list[str]:
    rows = conn.execute(
        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )
    return [r[0] for r in rows]


class RowKeys:
    """Answers "does this value name a row?" over one or more schemas of a connection.

    `schemas` are the attached databases to look in: the verifier's checker connection holds the
    final state as `main` and the initial one as `initial`, so a row the episode deleted or
    created counts too.
    """

    def __init__(self, conn: sqlite3.Connection, schemas: Collection[str] = ("main",)) -> None:
        self._conn = conn
        self._keys = {schema: key_columns(conn, schema) for schema in schemas}

    def names_row(self, name: str, value: Any) -> bool:
        """Whether argument `name` = `value` names a row of some key column."""
        if not names_a_row_candidate(name, value):
            return False
        for schema, keys in self._keys.items():
            for table, column in keys:
                query = f'SELECT 1 FROM {schema}."{table}" WHERE "{column}" = ? LIMIT 1'
                if self._conn.execute(query, (value,)).fetchone() is not None:
                    return True
        return False


def grounded_value(
    seen: Observations,
    value: str,
    *,
    before: int | None,
    rules: str = "",
    derived: Collection[str] = (),
    reference_reads: Collection[str] = (),
) -> bool:
    """Whether the episode showed `value` before message `before` (or may have worked it out)."""
    if value in derived:
        return seen.received(reference_reads, before=before)
    if rules and contains_identifier(rules, value):
        return True
    return seen.shows(value, before=before, pattern=identifier_pattern)


def ungrounded_writes(
    seen: Observations,
    write_tools: Collection[str],
    rows: RowKeys,
    *,
    rules: str = "",
    derived: Collection[str] = (),
    reference_reads: Collection[str] = (),
) -> list[str]:
    """The successful write calls' arguments that name a row the episode had not shown, as
    `tool(argument='value')` lines, in the order the calls were made."""
    problems: list[str] = []
    for call in seen.calls:
        if not call.ok or call.name not in write_tools:
            continue
        for name, value in argument_fields(call.arguments):
            text = str(value)
            if grounded_value(
                seen, text, before=call.at, rules=rules, derived=derived, reference_reads=reference_reads
            ):
                continue
            if rows.names_row(name, value):
                problems.append(f"{call.name}({name}={value!r})")
    return list(dict.fromkeys(problems))


def reference_ungrounded(env: Any, task: Task, messages: list[Message]) -> list[str]:
    """The ungrounded write arguments of a reference conversation (`messages`: the user's request,
    the reference calls and their results), checked against the environment's initial state.

    Training data must not teach a policy to write ids from memory: SFT skips such a reference.
    An environment without a template or known write tools (a simulated one) has none.
    """
    template = getattr(env, "template", None)
    write_tools = set(getattr(env, "write_tools", ()))
    if template is None or not write_tools:
        return []
    reads = {c.name for c in task.reference if c.name not in write_tools}
    return ungrounded_writes(
        Observations.of(ReplayTranscript(messages=messages)),
        write_tools,
        RowKeys(template),
        rules=getattr(env, "rules", "") or "",
        derived=task.derived_args,
        reference_reads=reads,
    )
