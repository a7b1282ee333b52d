"""Verification: run a task's checks against an episode's final state and answer, then score it.

`verify` never raises for a bad check or a bad episode: a query error, a python check that
crashes, a sandbox violation or an unusable judge answer fails that check with a detail saying
why. The reward formula lives in `arena.tasks.reward` (see its docstring).

Checks that read state need an instance with `initial` (the state at reset) and `snapshot()`
(a copy of the current state), i.e. an executable environment's instance; they live in
`arena.tasks.state_checks`. Answer checks and the grounding of writes read the transcript.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from arena.protocols import ChatModel
from arena.tasks.actions import run_action
from arena.tasks.grounding import RowKeys, ungrounded_writes
from arena.tasks.judge import judge_rubric
from arena.tasks.model import ActionCheck, AnswerCheck, PythonCheck, SqlCheck, StateMatchCheck, Task
from arena.tasks.normalize import contains_value, distinct_numbers
from arena.tasks.provenance import Observations
from arena.tasks.replay import ReferenceReplayError, reference_state
from arena.tasks.reward import STATE_CHECKS, CheckResult, RewardConfig, Verdict, compute_verdict
from arena.tasks.state_checks import (
    CheckSandbox,
    EpisodeStates,
    UntouchedMemo,
    must_sandbox,
    run_python,
    run_sql,
    run_state_match,
)
from arena.tasks.state_compare import compare_states, template_layout_of
from arena.tasks.transcript import TranscriptLike, assistant_turns, render_transcript

# Re-exported: callers verify through this module.
__all__ = ["CheckSandbox", "UntouchedMemo", "compare_states", "must_sandbox", "verify"]


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


def _ungrounded(
    task: Task,
    seen: Observations | None,
    write_tools: set[str] | None,
    states: EpisodeStates,
    rules: str,
    reference_reads: set[str],
) -> list[str]:
    """The episode's write arguments naming rows it never showed (`arena.tasks.grounding`)."""
    if seen is None or write_tools is None or not states.available:
        return []
    if not any(call.ok and call.name in write_tools for call in seen.calls):
        return []
    rows = RowKeys(states.final(), schemas=("main", "initial"))
    return ungrounded_writes(
        seen, write_tools, rows, rules=rules, derived=task.derived_args, reference_reads=reference_reads
    )


def _rules(instance: Any, env: Any) -> str:
    """The environment's rules (the policy's system prompt shows them), from the instance or `env`."""
    for source in (getattr(instance, "env", None), env):
        rules = getattr(source, "rules", None)
        if isinstance(rules, str):
            return rules
    return ""


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
    those checks fail with a detail saying so. `provenance=False` credits answer values and write
    identifiers the episode never showed (only for reference transcripts without real tool
    results). `memo`
    shares work between verifications with the same `expected_state`.
    """
    config = config or RewardConfig()
    answer = transcript.final_answer or ""
    states = EpisodeStates(instance)
    write_tools = _write_tools(instance, env)
    writes_required = None if write_tools is None else any(c.name in write_tools for c in task.reference)
    write_log = getattr(instance, "write_log", None)
    reference_reads = {c.name for c in task.reference if write_tools is None or c.name not in write_tools}
    seen = Observations.of(transcript) if provenance and not config.shaping_only else None
    base = template_layout_of(instance)
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
                    run_state_match(check, states, expected or "no reference state", base, memo, untouched)
                )
            elif isinstance(check, SqlCheck):
                results.append(run_sql(states.final(), check))
            elif isinstance(check, AnswerCheck):
                results.append(_run_answer(answer, check, seen, reference_reads))
            elif isinstance(check, PythonCheck):
                results.append(await run_python(task, check, states.images(), answer, sandbox))
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
        ungrounded = _ungrounded(task, seen, write_tools, states, _rules(instance, env), reference_reads)
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
        ungrounded=ungrounded,
    )
