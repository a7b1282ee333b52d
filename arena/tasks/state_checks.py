"""The checks that read an episode's database: `sql`, `python` and `state_match`.

SQL checks run on a private copy of the final state, read-only, with the initial state attached
as schema `initial` and a time limit per query. Python checks of synthesized tasks run in the
sandbox. `state_match` compares the final state with the reference replay's
(`arena.tasks.state_compare`). A broken check fails itself with a detail saying why; it never
fails the verification.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, Protocol

import structlog

from arena.env.state import from_image, to_image
from arena.tasks.model import PythonCheck, SqlCheck, StateMatchCheck, Task
from arena.tasks.reward import CheckResult
from arena.tasks.state_compare import Layout, compare_states

log = structlog.get_logger(__name__)

SQL_CHECK_TIMEOUT_S = 2.0


class CheckSandbox(Protocol):
    """The part of `arena.sandbox.SandboxPool` that runs python checks."""

    async def run_check(self, source: str, initial_image: bytes, final_image: bytes, answer: str) -> bool:
        """Run `check(initial, final, answer)` in a worker; raises on violations."""
        ...


class EpisodeStates:
    """Lazily built views of the episode's states, shared by the checks of one verification."""

    def __init__(self, instance: Any) -> None:
        self._instance = instance
        self._images: tuple[bytes, bytes] | None = None
        self._checker: sqlite3.Connection | None = None
        self._untouched: sqlite3.Connection | None = None

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

    def untouched(self) -> sqlite3.Connection:
        """A private copy of the initial state: the final state of an episode that changed nothing."""
        if self._untouched is None:
            self._untouched = from_image(self.images()[0])
        return self._untouched

    def close(self) -> None:
        for conn in (self._checker, self._untouched):
            if conn is not None:
                conn.close()


def run_sql(conn: sqlite3.Connection, check: SqlCheck) -> CheckResult:
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


def python_in_process(check: PythonCheck, images: tuple[bytes, bytes], answer: str) -> bool:
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


async def run_python(
    task: Task,
    check: PythonCheck,
    images: tuple[bytes, bytes],
    answer: str,
    sandbox: CheckSandbox | None,
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
        if sandboxed:
            assert sandbox is not None
            passed = bool(await sandbox.run_check(check.code, images[0], images[1], answer))
        else:
            passed = python_in_process(check, images, answer)
    except Exception as exc:  # a broken check fails itself, never the verification
        log.info("python_check_error", task=task.full_id, check=name, sandboxed=sandboxed, error=str(exc))
        # The sandbox's errors already say what happened ("the check raised ...", "timeout ...").
        detail = f"in the sandbox: {exc}" if sandboxed else f"check raised {type(exc).__name__}: {exc}"
        return CheckResult(kind="python", name=name, passed=False, detail=detail)
    return CheckResult(kind="python", name=name, passed=passed, detail="check returned " + str(passed))


class UntouchedMemo:
    """How the untouched initial state compares with one reference state, per `ignore` list.

    Verifications that share an expected state (the agents of the adversary gate, the samples of
    one task in a rollout group) ask it again for every episode that changed nothing; the answer
    never changes, so it is worked out once. One memo serves one task.
    """

    def __init__(self) -> None:
        self._problems: dict[tuple[str, ...], str | None] = {}

    def problem(
        self, states: EpisodeStates, expected: sqlite3.Connection, ignore: list[str], base: Layout | None
    ) -> str | None:
        """`compare_states(initial, expected, ignore)`, memoized."""
        key = tuple(ignore)
        if key not in self._problems:
            self._problems[key] = compare_states(states.untouched(), expected, ignore, base=base)
        return self._problems[key]


def run_state_match(
    check: StateMatchCheck,
    states: EpisodeStates,
    expected: sqlite3.Connection | str,
    base: Layout | None,
    memo: UntouchedMemo,
    untouched: bool,
) -> CheckResult:
    """Compare the final state with the reference's (`expected` is a reason when there is none)."""
    name = check.label
    if isinstance(expected, str):
        return CheckResult(kind="state_match", name=name, passed=False, detail=expected)
    if untouched:
        problem = memo.problem(states, expected, check.ignore, base)
    else:
        problem = compare_states(states.final(), expected, check.ignore, base=base)
    if problem is None:
        return CheckResult(
            kind="state_match", name=name, passed=True, detail="final state matches the reference"
        )
    return CheckResult(kind="state_match", name=name, passed=False, detail=problem)
