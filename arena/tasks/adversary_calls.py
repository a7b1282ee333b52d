"""What each non-working agent of the adversary gate does: its calls and its answer.

An agent is a list of `Attempt`s tried in order; the first that applies is the agent. An attempt
with a `probe` applies only when that call succeeds (a write aimed at another row that the tool
refuses proves nothing), and one with `must_change` only when the probe also changed the state.
`arena.tasks.adversary` runs the attempts and scores them; the fidelity bench
(`simulate.fidelity`) plays the same agents before its judge.

Row swaps prefer rows the reference episode showed: an agent that writes the wrong row with an
id it looked up is stopped only by the state checks, the one that guesses an id already by the
grounding rule, and the gate should test the checks.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

from arena.env.state import user_tables
from arena.tasks.grounding import RowKeys, argument_fields, names_a_row_candidate
from arena.tasks.model import AnswerCheck, Task
from arena.tasks.provenance import contains_identifier
from arena.types import ToolCall

AdversaryName = Literal[
    "empty",
    "answer_no_call",
    "values_done",
    "reads_only",
    "drop_last_write",
    "wrong_row",
    "writes_without_lookups",
    "extra_write",
]
# In the order the gate runs them (the no-call agents first).
ADVERSARIES: tuple[AdversaryName, ...] = get_args(AdversaryName)
# Agents that call tools: they need a task whose reference writes, on an executable environment.
CALLING: frozenset[AdversaryName] = frozenset(ADVERSARIES[3:])
# Other values tried for a swapped row argument before the agent is called inapplicable.
WRONG_ROW_TRIES = 4
# Rows of a table read to find the ones most like the reference's (tables of bundled envs are small).
NEAREST_SCAN = 500

Shown = Callable[[Any], bool]


@dataclass(frozen=True)
class Attempt:
    """One way an agent may act: its calls, and the call that must work for it to apply."""

    calls: list[ToolCall]
    probe: int | None = None
    must_change: bool = False


def values_answer(task: Task) -> str:
    """'Done: v1, v2, ...' with every value the task's answer checks expect (alternatives included)."""
    values = [v for c in task.checks if isinstance(c, AnswerCheck) for g in c.expected_groups() for v in g]
    return "Done: " + ", ".join(dict.fromkeys(values)) + "." if values else "Done."


def agent_answer(agent: AdversaryName, task: Task) -> str:
    """The final answer an agent gives."""
    if agent == "empty":
        return ""
    if agent == "values_done":
        return values_answer(task)
    answer = task.answer or ""
    return (answer or "Done.") if agent == "answer_no_call" else answer


def _key_columns_with(conn: sqlite3.Connection, value: Any) -> Iterator[tuple[str, str]]:
    """(table, column) pairs where `value` identifies a row: a primary-key column that holds it."""
    for table in user_tables(conn):
        keys = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")') if r[5]]
        for col in keys:
            if conn.execute(f'SELECT 1 FROM "{table}" WHERE "{col}" = ? LIMIT 1', (value,)).fetchone():
                yield table, col


def _nearest_rows(conn: sqlite3.Connection, table: str, col: str, value: Any, shown: Shown) -> list[Any]:
    """Other keys of `table`: rows the episode showed first, then the rows most like `value`'s.

    A wrong-row write that the tool refuses proves nothing; a sibling row (another placed order of
    the same user) is the mistake a policy would make, and the one the tool accepts.
    """
    cur = conn.execute(f'SELECT * FROM "{table}" WHERE "{col}" = ?', (value,))
    names = [d[0] for d in cur.description]
    original = cur.fetchone()
    rows = conn.execute(
        f'SELECT * FROM "{table}" WHERE "{col}" != ? LIMIT {NEAREST_SCAN}', (value,)
    ).fetchall()
    key = names.index(col)

    def rank(row: tuple[Any, ...]) -> tuple[bool, int, str]:
        likeness = sum(a == b for a, b in zip(row, original, strict=True))
        return (not shown(row[key]), -likeness, str(row[key]))

    rows.sort(key=rank)
    return [row[key] for row in rows[:WRONG_ROW_TRIES]]


def _swaps(template: sqlite3.Connection, name: str, value: Any, shown: Shown) -> Iterator[Any]:
    """Values of argument `name` that aim it at another row (a list argument: its last item swapped)."""
    if isinstance(value, list):
        if value and names_a_row_candidate(name.rstrip("s"), value[-1]):
            for other in _swaps(template, name.rstrip("s"), value[-1], shown):
                if other not in value:
                    yield [*value[:-1], other]
        return
    if not names_a_row_candidate(name, value):
        return
    for table, col in _key_columns_with(template, value):
        yield from _nearest_rows(template, table, col, value, shown)


def _swapped_writes(env: Any, task: Task, shown: Shown) -> Iterator[tuple[int, ToolCall]]:
    """(index, call): a reference write with one row argument aimed at another row, last write first."""
    template = getattr(env, "template", None)
    if template is None:
        return
    writes = set(getattr(env, "write_tools", ()))
    for index in reversed(range(len(task.reference))):
        call = task.reference[index]
        if call.name not in writes:
            continue
        for name, value in call.arguments.items():
            for other in _swaps(template, name, value, shown):
                yield index, ToolCall(name=call.name, arguments={**call.arguments, name: other})


def wrong_row_variants(
    env: Any, task: Task, shown: Shown | None = None
) -> Iterator[tuple[int, list[ToolCall]]]:
    """References with one write's row argument swapped for another row's key in the same table.

    Yields (index of the changed call, calls), last write first, at most `WRONG_ROW_TRIES` other
    keys per argument; the caller keeps the first variant whose changed call succeeds.
    """
    for index, changed in _swapped_writes(env, task, shown or (lambda _v: False)):
        yield index, [*task.reference[:index], changed, *task.reference[index + 1 :]]


def _names_unsaid_row(env: Any, task: Task, writes: list[ToolCall]) -> bool:
    """Whether a write names a row (of the initial state) that neither the user nor the rules give."""
    template = getattr(env, "template", None)
    if template is None:
        return False
    said = "\n".join([task.instruction, task.user.intent if task.user else "", getattr(env, "rules", "")])
    rows = RowKeys(template)
    return any(
        rows.names_row(name, value) and not contains_identifier(said, str(value))
        for call in writes
        for name, value in argument_fields(call.arguments)
    )


def attempts(agent: AdversaryName, env: Any, task: Task, shown: Shown) -> Iterable[Attempt]:
    """The attempts of one agent on `task` (empty: the agent does not apply).

    `shown` tells whether the reference episode showed a value (the rows an agent could have seen).
    """
    if agent not in CALLING:
        return [Attempt(calls=[])]
    write_tools = set(getattr(env, "write_tools", ()))
    reference = task.reference
    written = [i for i, c in enumerate(reference) if c.name in write_tools]
    if not written:
        return []
    if agent == "reads_only":
        return [Attempt(calls=[c for c in reference if c.name not in write_tools])]
    if agent == "drop_last_write":
        return [Attempt(calls=reference[: written[-1]] + reference[written[-1] + 1 :])]
    if agent == "writes_without_lookups":
        writes = [reference[i] for i in written]
        return [Attempt(calls=writes)] if _names_unsaid_row(env, task, writes) else []
    if agent == "wrong_row":
        return (Attempt(calls=calls, probe=index) for index, calls in wrong_row_variants(env, task, shown))
    return _extra_writes(env, task, shown, [reference[i] for i in reversed(written)])


def _extra_writes(env: Any, task: Task, shown: Shown, writes: list[ToolCall]) -> Iterator[Attempt]:
    """The reference, then one more write that changes another row (or repeats a write that adds one)."""
    reference = list(task.reference)
    for _, changed in _swapped_writes(env, task, shown):
        yield Attempt(calls=[*reference, changed], probe=len(reference), must_change=True)
    for call in writes:  # an insert repeated adds a row too many
        yield Attempt(calls=[*reference, call], probe=len(reference), must_change=True)


def describe(call: ToolCall) -> str:
    """`tool({"arg": "value"})`, for an agent's detail line."""
    return f"{call.name}({json.dumps(call.arguments, default=str)})"
