"""The adversary gate: every task is scored against agents that do not do the work (DESIGN §4).

GRPO finds every reward that can be had without the work, so a task is usable only when each of
these non-working agents earns exactly 0 on it:

- `empty`: no call, an empty answer;
- `answer_no_call`: no call, the reference answer;
- `values_done`: no call, every value the answer checks expect joined after "Done:";
- `reads_only`: the reference's read calls (none of its writes), then the reference answer;
- `drop_last_write`: the reference without its last write, then the reference answer;
- `wrong_row`: the reference with one write aimed at another row of the same table (another
  value of the column the argument comes from, the first one the tool accepts), then the
  reference answer.

The last three need a task whose reference writes; `wrong_row` also needs a write argument whose
value is a row of some table with other rows the tool accepts. An agent that does not apply is
reported as such and cannot reject the task. Agents that call tools run on fresh instances of an
executable environment; on a simulated one only the no-call agents run.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from arena.env.state import user_tables
from arena.protocols import ChatModel
from arena.tasks.model import AnswerCheck, Task
from arena.tasks.replay import ReferenceReplayError, new_instance
from arena.tasks.reward import RewardConfig, Verdict
from arena.tasks.transcript import ReplayTranscript
from arena.tasks.verify import CheckSandbox, UntouchedMemo, verify
from arena.types import Message, ToolCall

AdversaryName = Literal[
    "empty", "answer_no_call", "values_done", "reads_only", "drop_last_write", "wrong_row"
]
ADVERSARIES: tuple[AdversaryName, ...] = (
    "empty",
    "answer_no_call",
    "values_done",
    "reads_only",
    "drop_last_write",
    "wrong_row",
)
# Other values tried for a `wrong_row` argument before the agent is called inapplicable.
WRONG_ROW_TRIES = 4
# Rows of a table read to find the ones most like the reference's (tables of bundled envs are small).
NEAREST_SCAN = 500


class AdversaryResult(BaseModel):
    """One non-working agent on one task: whether it applied, what it earned, why."""

    model_config = ConfigDict(frozen=True)

    agent: AdversaryName
    applies: bool
    reward: float = 0.0
    detail: str = ""
    # Set when the agent could not be scored (e.g. a sandboxed environment and no sandbox): a task
    # that cannot be shown safe is rejected like one that pays.
    error: str = ""

    @property
    def paid(self) -> bool:
        """Whether the agent earned anything, or could not be scored (the task is then rejected)."""
        return bool(self.error) or (self.applies and self.reward > 0)


def transcript_of(
    task: Task, calls: list[ToolCall], results: list[Any] | None, answer: str
) -> ReplayTranscript:
    """The transcript of an agent that makes `calls` (with their `results`), then answers `answer`.

    The user's words are the instruction and, for a conversational task, the intent a simulated
    user would reveal; `results` None (a simulated environment) shows placeholder results.
    """
    messages = [Message(role="user", content=task.instruction)]
    if task.mode == "conversational" and task.user is not None:
        messages.append(Message(role="user", content=task.user.intent))
    for i, call in enumerate(calls):
        call_id = f"call-{i + 1}"
        messages.append(
            Message(
                role="assistant", tool_calls=[ToolCall(id=call_id, name=call.name, arguments=call.arguments)]
            )
        )
        if results is None:
            content = "(simulated)"
        else:
            r = results[i]
            content = json.dumps(r.output, ensure_ascii=False, default=str) if r.ok else f"error: {r.error}"
        messages.append(Message(role="tool", name=call.name, tool_call_id=call_id, content=content))
    messages.append(Message(role="assistant", content=answer))
    return ReplayTranscript(messages=messages, final_answer=answer)


def values_answer(task: Task) -> str:
    """'Done: v1, v2, ...' with every value the task's answer checks expect (alternatives included)."""
    values = [v for c in task.checks if isinstance(c, AnswerCheck) for g in c.expected_groups() for v in g]
    return "Done: " + ", ".join(dict.fromkeys(values)) + "." if values else "Done."


def _key_columns_with(conn: sqlite3.Connection, value: Any) -> Iterator[tuple[str, str]]:
    """(table, column) pairs where `value` identifies a row: a primary-key column that holds it."""
    for table in user_tables(conn):
        keys = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")') if r[5]]
        for col in keys:
            if conn.execute(f'SELECT 1 FROM "{table}" WHERE "{col}" = ? LIMIT 1', (value,)).fetchone():
                yield table, col


def _nearest_rows(conn: sqlite3.Connection, table: str, col: str, value: Any) -> list[Any]:
    """Other keys of `table`, the rows most like `value`'s first (same owner, same status, ...).

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

    def likeness(row: tuple[Any, ...]) -> int:
        return sum(a == b for a, b in zip(row, original, strict=True))

    rows.sort(key=lambda row: (-likeness(row), str(row[key])))
    return [row[key] for row in rows[:WRONG_ROW_TRIES]]


def _row_reference(name: str, value: Any) -> bool:
    """Arguments that can name a row: strings (ids like "CARD-11"), or integers named like an id."""
    if isinstance(value, str):
        return bool(value)
    return isinstance(value, int) and not isinstance(value, bool) and name.lower().endswith("id")


def _swaps(template: sqlite3.Connection, name: str, value: Any) -> Iterator[Any]:
    """Values of argument `name` that aim it at another row (a list argument: its last item swapped)."""
    if isinstance(value, list):
        if value and _row_reference(name.rstrip("s"), value[-1]):
            for other in _swaps(template, name.rstrip("s"), value[-1]):
                if other not in value:
                    yield [*value[:-1], other]
        return
    if not _row_reference(name, value):
        return
    for table, col in _key_columns_with(template, value):
        yield from _nearest_rows(template, table, col, value)


def wrong_row_variants(env: Any, task: Task) -> Iterator[tuple[int, list[ToolCall]]]:
    """References with one write's row argument swapped for another row's key in the same table.

    Yields (index of the changed call, calls), last write first, at most `WRONG_ROW_TRIES` other
    keys per argument; the caller keeps the first variant whose changed call succeeds.
    """
    template = getattr(env, "template", None)
    if template is None:
        return
    writes = set(getattr(env, "write_tools", ()))
    for index in reversed(range(len(task.reference))):
        call = task.reference[index]
        if call.name not in writes:
            continue
        for name, value in call.arguments.items():
            for other in _swaps(template, name, value):
                changed = ToolCall(name=call.name, arguments={**call.arguments, name: other})
                yield index, [*task.reference[:index], changed, *task.reference[index + 1 :]]


class AdversaryRunner:
    """Scores the non-working agents on one task, sharing the verification settings."""

    def __init__(
        self,
        env: Any,
        task: Task,
        *,
        judge: ChatModel | None = None,
        sandbox: CheckSandbox | None = None,
        config: RewardConfig | None = None,
        expected_state: sqlite3.Connection | None = None,
    ) -> None:
        self.env = env
        self.task = task
        self.kwargs: dict[str, Any] = {
            "judge": judge,
            "sandbox": sandbox,
            "config": config,
            "env": env,
            "expected_state": expected_state,
            "memo": UntouchedMemo(),
        }
        self.executable = getattr(env, "kind", "executable") == "executable"
        self.writes = set(getattr(env, "write_tools", ())) if self.executable else set()

    async def _score(self, calls: list[ToolCall], answer: str) -> tuple[Verdict, list[Any]]:
        instance = new_instance(self.env, self.kwargs["sandbox"]) if self.executable else None
        try:
            results = [await instance.call(c.name, dict(c.arguments)) for c in calls] if instance else None
            transcript = transcript_of(self.task, calls, results, answer)
            verdict = await verify(self.task, instance, transcript, **self.kwargs)
        finally:
            if instance is not None:
                await instance.aclose()
        return verdict, results or []

    async def _result(self, agent: AdversaryName, calls: list[ToolCall], answer: str) -> AdversaryResult:
        verdict, _ = await self._score(calls, answer)
        return AdversaryResult(agent=agent, applies=True, reward=verdict.reward, detail=verdict.summary())

    async def run(self, agent: AdversaryName) -> AdversaryResult:
        """Score one agent (inapplicable agents come back with `applies=False`)."""
        task, answer = self.task, self.task.answer or ""
        if agent == "empty":
            return await self._result(agent, [], "")
        if agent == "answer_no_call":
            return await self._result(agent, [], answer or "Done.")
        if agent == "values_done":
            return await self._result(agent, [], values_answer(task))
        written = [i for i, c in enumerate(task.reference) if c.name in self.writes]
        if not written:
            return AdversaryResult(agent=agent, applies=False, detail="the reference makes no write")
        if agent == "reads_only":
            return await self._result(agent, [c for c in task.reference if c.name not in self.writes], answer)
        if agent == "drop_last_write":
            last = written[-1]
            return await self._result(agent, task.reference[:last] + task.reference[last + 1 :], answer)
        for index, calls in wrong_row_variants(self.env, task):
            verdict, results = await self._score(calls, answer)
            if results[index].ok:
                changed = calls[index]
                detail = f"{changed.name}({json.dumps(changed.arguments, default=str)}): {verdict.summary()}"
                return AdversaryResult(agent=agent, applies=True, reward=verdict.reward, detail=detail)
        return AdversaryResult(
            agent=agent, applies=False, detail="no other row that a reference write accepts"
        )

    async def run_all(self) -> list[AdversaryResult]:
        """Every agent, in `ADVERSARIES` order."""
        return [await self.run(agent) for agent in ADVERSARIES]


async def run_adversaries(env: Any, task: Task, **kwargs: Any) -> list[AdversaryResult]:
    """Score every non-working agent on `task` (keyword arguments as `AdversaryRunner`'s)."""
    try:
        return await AdversaryRunner(env, task, **kwargs).run_all()
    except ReferenceReplayError as exc:  # e.g. a sandboxed environment without a sandbox
        return [AdversaryResult(agent=a, applies=True, error=str(exc), detail=str(exc)) for a in ADVERSARIES]
