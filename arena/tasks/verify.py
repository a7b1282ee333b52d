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
from typing import Any, Protocol

import structlog

from arena.env.state import from_image, to_image
from arena.protocols import ChatModel
from arena.tasks.actions import run_action
from arena.tasks.judge import judge_rubric
from arena.tasks.model import ActionCheck, AnswerCheck, PythonCheck, SqlCheck, StateMatchCheck, Task
from arena.tasks.normalize import contains_value, distinct_numbers
from arena.tasks.provenance import Observations
from arena.tasks.replay import ReferenceReplayError, reference_state
from arena.tasks.reward import STATE_CHECKS, CheckResult, RewardConfig, Verdict, compute_verdict
from arena.tasks.state_compare import Layout, compare_states
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


def _run_answer(
    answer: str, check: AnswerCheck, seen: Observations | None, reference_reads: set[str]
) -> CheckResult:
    """Expected values present (and observed, unless `seen` is None), forbidden ones absent, caps kept."""

    def observed(group: list[str], stated: list[str]) -> bool:
        # Alternatives are one value written several ways: seeing any of them is seeing it.
        if seen is None:
            return True
        if any(v in check.derived for v in stated):
            return seen.received(reference_reads)
        return any(seen.shows(v) for v in group)

    missing: list[list[str]] = []
    guessed: list[str] = []
    for group in check.expected_groups():
        stated = [v for v in group if contains_value(answer, v)]
        if not stated:
            missing.append(group)
        elif not observed(group, stated):
            guessed.append(stated[0])
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
    if guessed:
        problems.append(
            "states "
            + ", ".join(repr(v) for v in guessed)
            + " without having seen it in a tool result or the user's words (a guess)"
        )
    if present:
        problems.append("should not mention " + ", ".join(repr(v) for v in present))
    if not answer.strip():
        problems.insert(0, "empty answer")
    passed = not (missing or guessed or present or too_long or too_many_numbers)
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
            passed = _python_in_process(check, images, answer)
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
        self, states: _States, expected: sqlite3.Connection, ignore: list[str], base: Layout | None
    ) -> str | None:
        """`compare_states(initial, expected, ignore)`, memoized."""
        key = tuple(ignore)
        if key not in self._problems:
            self._problems[key] = compare_states(states.untouched(), expected, ignore, base=base)
        return self._problems[key]


def _run_state_match(
    check: StateMatchCheck,
    states: _States,
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


async def _expected_state(
    task: Task, env: Any, given: sqlite3.Connection | None, sandbox: CheckSandbox | None
) -> tuple[sqlite3.Connection | str | None, bool]:
    """The reference's final state for `state_match` (or why there is none) and whether we own it."""
    if given is not None or not any(isinstance(c, StateMatchCheck) for c in task.checks):
        return given, False
    if env is None:
        return "no reference state (pass env or expected_state)", False
    try:
        return await reference_state(env, task, sandbox=sandbox), True
    except ReferenceReplayError as exc:
        return str(exc), False


def _template_layout(instance: Any) -> Layout | None:
    """The layout of the template an instance started from, when its initial state is that template."""
    env = getattr(instance, "env", None)
    template = getattr(env, "template", None)
    if template is None or getattr(instance, "initial", None) is not template:
        return None
    return env.template_layout()  # type: ignore[no-any-return, union-attr]


def _write_tools(instance: Any, env: Any) -> set[str] | None:
    """The environment's write tools, from the instance's environment or `env` (None: unknown)."""
    for source in (getattr(instance, "env", None), env):
        if source is not None and getattr(source, "kind", "executable") == "executable":
            tools = getattr(source, "write_tools", None)
            if tools is not None:
                return set(tools)
    return None


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
    provenance: bool = True,
    memo: UntouchedMemo | None = None,
) -> Verdict:
    """Run every check of `task` on the episode (its instance's states and its transcript) and score it.

    `state_match` needs the reference's final state: pass `expected_state` (see
    `arena.tasks.replay.reference_state`, computed once per task), or `env` to replay it here.
    Rubric checks need `judge`; python checks of synthesized tasks need `sandbox`. Without them
    those checks fail with a detail saying so. `provenance=False` credits answer values the
    episode never showed (only for reference transcripts without real tool results). `memo`
    shares work between verifications with the same `expected_state`.
    """
    config = config or RewardConfig()
    answer = transcript.final_answer or ""
    states = _States(instance)
    write_tools = _write_tools(instance, env)
    writes_required = None if write_tools is None else any(c.name in write_tools for c in task.reference)
    write_log = getattr(instance, "write_log", None)
    reference_reads = {c.name for c in task.reference if write_tools is None or c.name not in write_tools}
    seen = Observations.of(transcript) if provenance and not config.shaping_only else None
    base = _template_layout(instance)
    memo = memo or UntouchedMemo()
    # An instance that never changed its template-born state still holds the initial state.
    untouched = base is not None and getattr(instance, "changed", None) is False
    results: list[CheckResult] = []
    expected, owned = (None, False)
    try:
        if states.available:
            expected, owned = await _expected_state(task, env, expected_state, sandbox)
        for check in task.checks:
            if check.kind in STATE_CHECKS and not states.available:
                results.append(
                    CheckResult(
                        kind=check.kind,
                        name=check.label,
                        passed=False,
                        detail="needs an executable environment's state",
                    )
                )
            elif isinstance(check, StateMatchCheck):
                results.append(
                    _run_state_match(check, states, expected or "no reference state", base, memo, untouched)
                )
            elif isinstance(check, SqlCheck):
                results.append(_run_sql(states.final(), check))
            elif isinstance(check, AnswerCheck):
                results.append(_run_answer(answer, check, seen, reference_reads))
            elif isinstance(check, PythonCheck):
                results.append(await _run_python(task, check, states.images(), answer, sandbox))
            elif isinstance(check, ActionCheck):
                results.append(run_action(write_log, check))
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
    finally:
        states.close()
        if owned and isinstance(expected, sqlite3.Connection):
            expected.close()
    return compute_verdict(
        results,
        malformed_calls=transcript.malformed_calls,
        turns=assistant_turns(transcript),
        config=config,
        writes_required=None if config.shaping_only else writes_required,
        wrote=None if write_log is None else bool(write_log),
    )
