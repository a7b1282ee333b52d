"""Verification: run a task's checks against an episode's final state and answer, then score it.

`verify` never raises for a bad check or a bad episode: a query error, a python check that
crashes, a sandbox violation or an unusable judge answer fails that check with a detail saying
why. The reward formula lives in `arena.tasks.reward` (see its docstring).

Checks that read state need an instance with `initial` (the state at reset) and `snapshot()`
(a copy of the current state), i.e. an executable environment's instance. SQL checks run on a
private copy of the final state, read-only, with the initial state attached as schema `initial`
and a time limit per query.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from arena.env.state import to_image, user_tables
from arena.protocols import ChatModel
from arena.tasks.judge import judge_rubric
from arena.tasks.model import AnswerCheck, PythonCheck, SqlCheck, StateMatchCheck, Task
from arena.tasks.normalize import contains_value, distinct_numbers
from arena.tasks.replay import ReferenceReplayError, reference_state
from arena.tasks.reward import CheckResult, RewardConfig, Verdict, compute_verdict, needs_change_evidence
from arena.tasks.transcript import TranscriptLike, assistant_turns, render_transcript

log = structlog.get_logger(__name__)

SQL_CHECK_TIMEOUT_S = 2.0


class CheckSandbox(Protocol):
    """The part of `arena.sandbox.SandboxPool` that runs python checks."""

    async def run_check(self, source: str, initial_image: bytes, final_image: bytes, answer: str) -> bool:
        """Run `check(initial, final, answer)` in a worker; raises on violations."""
        ...


class _States:
    """Lazily built views of the episode's states, shared by the checks of one verification."""

    def __init__(self, instance: Any) -> None:
        self._instance = instance
        self._images: tuple[bytes, bytes] | None = None
        self._checker: sqlite3.Connection | None = None

    @property
    def available(self) -> bool:
        return hasattr(self._instance, "initial") and hasattr(self._instance, "snapshot")

    def images(self) -> tuple[bytes, bytes]:
        """(initial, final) database images."""
        if self._images is None:
            # `initial` may be the environment's shared template: `to_image` serializes under the
            # runtime's copy lock. `image()` (the runtime's) skips the copy `snapshot()` makes.
            image_of = getattr(self._instance, "image", None)
            if callable(image_of):
                final_image = image_of()
            else:
                final = self._instance.snapshot()
                try:
                    final_image = to_image(final)
                finally:
                    final.close()
            self._images = (to_image(self._instance.initial), final_image)
        return self._images

    def final(self) -> sqlite3.Connection:
        """A read-only copy of the final state with the initial one attached as `initial`."""
        if self._checker is None:
            initial_image, final_image = self.images()
            conn = sqlite3.connect(":memory:")
            conn.deserialize(final_image)
            conn.execute("ATTACH DATABASE ':memory:' AS initial")
            conn.deserialize(initial_image, name="initial")
            conn.execute("PRAGMA query_only = ON")
            self._checker = conn
        return self._checker

    def changed(self) -> bool:
        """Whether the final state differs from the initial one (rows compared, not pages)."""
        initial_image, final_image = self.images()
        if initial_image == final_image:
            return False
        initial = sqlite3.connect(":memory:")
        try:
            initial.deserialize(initial_image)
            return compare_states(self.final(), initial) is not None
        finally:
            initial.close()

    def close(self) -> None:
        if self._checker is not None:
            self._checker.close()


def _rows(conn: sqlite3.Connection, table: str, skip: set[str]) -> tuple[list[str], Counter[tuple[Any, ...]]]:
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")') if r[1] not in skip]
    select = ", ".join(f'"{c}"' for c in cols) or "1"
    return cols, Counter(tuple(row) for row in conn.execute(f'SELECT {select} FROM "{table}"'))


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def compare_states(
    actual: sqlite3.Connection, expected: sqlite3.Connection, ignore: Sequence[str] = ()
) -> str | None:
    """None when every table (minus `ignore`d tables/`table.column`s) holds the same rows; else why not.

    Rows are compared as multisets, so row order (and rowids of tables with a key) do not matter.
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
    for table in sorted(got_tables & want_tables):
        skip = skip_cols.get(table, set())
        got_cols, got = _rows(actual, table, skip)
        want_cols, want = _rows(expected, table, skip)
        if got_cols != want_cols:
            problems.append(f"{table}: columns differ")
            continue
        missing, extra = want - got, got - want
        if missing or extra:
            n_missing, n_extra = sum(missing.values()), sum(extra.values())
            row = min(missing, key=repr) if missing else min(extra, key=repr)
            example = f"{'missing' if missing else 'unexpected'} {_short(repr(row))}"
            problems.append(f"{table}: {n_missing} row(s) missing, {n_extra} unexpected, e.g. {example}")
    if not problems:
        return None
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more


def _run_sql(conn: sqlite3.Connection, check: SqlCheck) -> CheckResult:
    deadline = time.monotonic() + SQL_CHECK_TIMEOUT_S
    # Abort runaway queries (a synthesized cartesian join) instead of blocking the event loop.
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        row = conn.execute(check.sql).fetchone()
    except sqlite3.Error as exc:
        detail = (
            f"query took over {SQL_CHECK_TIMEOUT_S:g}s"
            if "interrupted" in str(exc)
            else f"query error: {exc}"
        )
        return CheckResult(kind="sql", name=check.label, passed=False, detail=detail)
    finally:
        conn.set_progress_handler(None, 0)
    if row is None:
        return CheckResult(kind="sql", name=check.label, passed=False, detail="query returned no row")
    value = row[0]
    passed = value is not None and not isinstance(value, (bytes, str)) and bool(value)
    return CheckResult(kind="sql", name=check.label, passed=passed, detail=f"query returned {value!r}")


def _describe_expected(group: list[str]) -> str:
    """`'3'`, or `one of '3', 'third'` for a group of alternatives."""
    if len(group) == 1:
        return repr(group[0])
    return "one of " + ", ".join(repr(v) for v in group)


def _run_answer(answer: str, check: AnswerCheck) -> CheckResult:
    missing = [g for g in check.expected_groups() if not any(contains_value(answer, v) for v in g)]
    present = [v for v in check.not_contains if contains_value(answer, v)]
    problems = []
    numbers = len(distinct_numbers(answer))
    too_long = len(answer) > check.max_chars
    too_many_numbers = numbers > check.max_numbers
    if too_long:
        problems.append(f"answer is {len(answer):,} characters, over the cap of {check.max_chars:,}")
    if too_many_numbers:
        problems.append(f"answer mentions {numbers} distinct numbers, over the cap of {check.max_numbers}")
    if missing:
        problems.append("missing " + ", ".join(_describe_expected(v) for v in missing))
    if present:
        problems.append("should not mention " + ", ".join(repr(v) for v in present))
    if not answer.strip():
        problems.insert(0, "empty answer")
    passed = not (missing or present or too_long or too_many_numbers)
    detail = "; ".join(problems) if problems else "answer has the expected values"
    return CheckResult(kind="answer", name=check.label, passed=passed, detail=detail)


def _python_in_process(check: PythonCheck, images: tuple[bytes, bytes], answer: str) -> bool:
    conns = []
    for image in images:
        conn = sqlite3.connect(":memory:")
        conn.deserialize(image)
        conns.append(conn)
    try:
        namespace: dict[str, Any] = {"__name__": "arena_check"}
        exec(compile(check.code, "<python check>", "exec"), namespace)
        result = namespace["check"](conns[0], conns[1], answer)
    finally:
        for conn in conns:
            conn.close()
    if type(result).__name__ not in ("bool", "bool_"):  # numpy's bool too, as in the sandbox
        raise TypeError(f"check returned {type(result).__name__}, not bool")
    return bool(result)


def must_sandbox(task: Task, check: PythonCheck) -> bool:
    """Python checks written by a model always run in the sandbox; hand-written ones may opt in."""
    return task.origin != "manual" or check.sandbox or os.environ.get("ARENA_SANDBOX", "") == "all"


async def _run_python(
    task: Task, check: PythonCheck, states: _States, answer: str, sandbox: CheckSandbox | None
) -> CheckResult:
    name = check.label
    sandboxed = must_sandbox(task, check)
    if sandboxed and sandbox is None:
        return CheckResult(
            kind="python",
            name=name,
            passed=False,
            detail="this check must run in the sandbox, and none was given",
        )
    try:
        images = states.images()
        if sandboxed:
            assert sandbox is not None
            passed = bool(await sandbox.run_check(check.code, images[0], images[1], answer))
        else:
            passed = _python_in_process(check, images, answer)
    except Exception as exc:  # a broken check fails itself, never the verification
        log.info("python_check_error", task=task.full_id, check=name, sandboxed=sandboxed, error=str(exc))
        # The sandbox's errors already say what happened ("the check raised ...", "timeout ...").
        detail = f"in the sandbox: {exc}" if sandboxed else f"check raised {type(exc).__name__}: {exc}"
        return CheckResult(kind="python", name=name, passed=False, detail=detail)
    return CheckResult(kind="python", name=name, passed=passed, detail="check returned " + str(passed))


async def _run_state_match(
    task: Task,
    check: StateMatchCheck,
    states: _States,
    env: Any,
    expected_state: sqlite3.Connection | None,
    sandbox: CheckSandbox | None,
) -> CheckResult:
    name = check.label
    owned = False
    if expected_state is None:
        if env is None:
            return CheckResult(
                kind="state_match",
                name=name,
                passed=False,
                detail="no reference state (pass env or expected_state)",
            )
        try:
            expected_state = await reference_state(env, task, sandbox=sandbox)
        except ReferenceReplayError as exc:
            return CheckResult(kind="state_match", name=name, passed=False, detail=str(exc))
        owned = True
    try:
        final = states.final()
        problem = compare_states(final, expected_state, check.ignore)
    finally:
        if owned:
            expected_state.close()
    if problem is None:
        return CheckResult(
            kind="state_match", name=name, passed=True, detail="final state matches the reference"
        )
    return CheckResult(kind="state_match", name=name, passed=False, detail=problem)


async def verify(
    task: Task,
    instance: Any,
    transcript: TranscriptLike,
    *,
    judge: ChatModel | None = None,
    sandbox: CheckSandbox | None = None,
    config: RewardConfig | None = None,
    env: Any = None,
    expected_state: sqlite3.Connection | None = None,
) -> Verdict:
    """Run every check of `task` on the episode (its instance's states and its transcript) and score it.

    `state_match` needs the reference's final state: pass `expected_state` (see
    `arena.tasks.replay.reference_state`, computed once per task), or `env` to replay it here.
    Rubric checks need `judge`; python checks of synthesized tasks need `sandbox`. Without them
    those checks fail with a detail saying so.
    """
    config = config or RewardConfig()
    answer = transcript.final_answer or ""
    states = _States(instance)
    results: list[CheckResult] = []
    state_changed: bool | None = None
    try:
        for check in task.checks:
            if check.kind in ("state_match", "sql", "python") and not states.available:
                results.append(
                    CheckResult(
                        kind=check.kind,
                        name=check.label,
                        passed=False,
                        detail="needs an executable environment's state",
                    )
                )
            elif isinstance(check, StateMatchCheck):
                results.append(await _run_state_match(task, check, states, env, expected_state, sandbox))
            elif isinstance(check, SqlCheck):
                results.append(_run_sql(states.final(), check))
            elif isinstance(check, AnswerCheck):
                results.append(_run_answer(answer, check))
            elif isinstance(check, PythonCheck):
                results.append(await _run_python(task, check, states, answer, sandbox))
            else:
                intent = task.user.intent if task.user else task.instruction
                results.append(
                    await judge_rubric(
                        judge,
                        check,
                        intent=intent,
                        transcript_text=render_transcript(transcript),
                        attempts=config.judge_attempts,
                    )
                )
        if states.available and needs_change_evidence(results):
            state_changed = states.changed()
    finally:
        states.close()
    return compute_verdict(
        results,
        malformed_calls=transcript.malformed_calls,
        turns=assistant_turns(transcript),
        config=config,
        state_changed=state_changed,
    )
