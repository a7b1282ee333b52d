"""The two gates every task must pass before use (DESIGN §4).

- gold gate: replaying the reference solution (calls, then the reference answer) passes every
  check and earns it, i.e. scores 1.0 before penalties: a reference that writes an id it never
  looked up passes its checks and earns nothing (`arena.tasks.grounding`), and fails here. The expected state for `state_match` comes from a
  *second*, independent replay, so a tool that is not deterministic fails the gate here instead
  of failing every agent later.
- adversary gate: every non-working agent of `arena.tasks.adversary` (the empty episode, the
  reference answer without a call, the reads without the writes, ...) earns exactly 0; otherwise
  the checks pay for something other than the work, and GRPO will find it.

Tasks of simulated environments cannot be replayed (no state, tools played by a model); their
gold transcript carries the reference calls without results, and only answer/rubric checks make
sense for them.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from arena.protocols import ChatModel
from arena.tasks.adversary import AdversaryResult, reference_view, run_adversaries, transcript_of
from arena.tasks.model import Task
from arena.tasks.replay import (
    ReferenceReplayError,
    first_failure,
    reference_state,
    replay_reference,
)
from arena.tasks.reward import RewardConfig, Verdict
from arena.tasks.transcript import ReplayTranscript
from arena.tasks.verify import CheckSandbox, verify


class GateResult(BaseModel):
    """The outcome of one gate: whether the task got through, why not, and the verdict if one was made."""

    model_config = ConfigDict(frozen=True)

    gate: Literal["gold", "adversary"]
    ok: bool
    detail: str
    verdict: Verdict | None = None
    # The adversary gate's agents, each with what it earned.
    agents: list[AdversaryResult] = []


class GateReport(BaseModel):
    """Both gates for one task; `ok` when the task may be used."""

    task: str
    gold: GateResult
    adversary: GateResult

    @property
    def ok(self) -> bool:
        """Whether both gates let the task through."""
        return self.gold.ok and self.adversary.ok


def _is_executable(env: Any) -> bool:
    return getattr(env, "kind", "executable") == "executable"


def reference_transcript(task: Task, results: list[Any] | None) -> ReplayTranscript:
    """The transcript of an agent that makes exactly the reference calls, then gives the reference answer."""
    return transcript_of(task, task.reference, results, task.answer or "")


async def gold_gate(
    env: Any,
    task: Task,
    *,
    judge: ChatModel | None = None,
    sandbox: CheckSandbox | None = None,
    config: RewardConfig | None = None,
    expected_state: sqlite3.Connection | None = None,
) -> GateResult:
    """Replay the reference solution and require every check to pass (score 1.0 before penalties)."""
    result, _ = await _gold(
        env, task, judge=judge, sandbox=sandbox, config=config, expected_state=expected_state
    )
    return result


async def _gold(
    env: Any,
    task: Task,
    *,
    judge: ChatModel | None,
    sandbox: CheckSandbox | None,
    config: RewardConfig | None,
    expected_state: sqlite3.Connection | None,
) -> tuple[GateResult, list[Any] | None]:
    """The gold gate, and the reference's tool results (None when it could not be replayed)."""
    if not _is_executable(env):
        # Simulated results are placeholders: the answer's values cannot have been observed.
        transcript = reference_transcript(task, None)
        verdict = await verify(
            task, None, transcript, judge=judge, sandbox=sandbox, config=config, provenance=False
        )
        return _gold_result(verdict), None
    try:
        instance, results = await replay_reference(env, task, sandbox=sandbox)
    except ReferenceReplayError as exc:
        return GateResult(gate="gold", ok=False, detail=str(exc)), None
    try:
        problem = first_failure(results)
        if problem is not None:
            return GateResult(gate="gold", ok=False, detail=problem), results
        verdict = await verify(
            task,
            instance,
            reference_transcript(task, results),
            judge=judge,
            sandbox=sandbox,
            config=config,
            env=env,
            expected_state=expected_state,
        )
    finally:
        await instance.aclose()
    return _gold_result(verdict), results


def _gold_result(verdict: Verdict) -> GateResult:
    failed = [c for c in verdict.checks if not c.passed]
    if failed:
        detail = "; ".join(f"{c.name}: {c.detail}" for c in failed)
        return GateResult(
            gate="gold", ok=False, detail=f"reference solution fails: {detail}", verdict=verdict
        )
    if verdict.unearned:
        # Every check passed and the rules still pay nothing (e.g. a write of an id the reference
        # never looked up): a policy imitating this reference would learn the shortcut.
        return GateResult(
            gate="gold",
            ok=False,
            detail=f"reference solution earns nothing: {verdict.unearned}",
            verdict=verdict,
        )
    return GateResult(gate="gold", ok=True, detail="reference solution passes every check", verdict=verdict)


async def adversary_gate(
    env: Any,
    task: Task,
    *,
    judge: ChatModel | None = None,
    sandbox: CheckSandbox | None = None,
    config: RewardConfig | None = None,
    expected_state: sqlite3.Connection | None = None,
    reference_results: list[Any] | None = None,
) -> GateResult:
    """Score every non-working agent; the gate holds when none of them earns anything.

    `reference_results`, the tool results of a reference replay already made, saves replaying it
    again to see which rows the reference showed.
    """
    shown = None if reference_results is None else reference_view(task, reference_results)
    agents = await run_adversaries(
        env,
        task,
        judge=judge,
        sandbox=sandbox,
        config=config,
        expected_state=expected_state,
        shown=shown,
    )
    paid = [a for a in agents if a.paid]
    if paid:
        detail = "; ".join(f"{a.agent} earns {a.reward:.2f} ({a.error or a.detail})" for a in paid)
        return GateResult(gate="adversary", ok=False, detail=detail, agents=agents)
    applied = sum(a.applies for a in agents)
    return GateResult(
        gate="adversary", ok=True, detail=f"all {applied} non-working agents earn 0", agents=agents
    )


async def run_gates(
    env: Any,
    task: Task,
    *,
    judge: ChatModel | None = None,
    sandbox: CheckSandbox | None = None,
    config: RewardConfig | None = None,
) -> GateReport:
    """Both gates, sharing one expected-state replay (when the task has a `state_match` check)."""
    expected: sqlite3.Connection | None = None
    if _is_executable(env) and any(c.kind == "state_match" for c in task.checks):
        try:
            expected = await reference_state(env, task, sandbox=sandbox)
        except ReferenceReplayError as exc:
            failed = GateResult(gate="gold", ok=False, detail=str(exc))
            return GateReport(
                task=task.full_id,
                gold=failed,
                adversary=GateResult(gate="adversary", ok=False, detail="not run"),
            )
    try:
        kwargs: dict[str, Any] = {
            "judge": judge,
            "sandbox": sandbox,
            "config": config,
            "expected_state": expected,
        }
        gold, results = await _gold(env, task, **kwargs)
        adversary = await adversary_gate(env, task, **kwargs, reference_results=results)
    finally:
        if expected is not None:
            expected.close()
    return GateReport(task=task.full_id, gold=gold, adversary=adversary)


class TaskGateRecord(BaseModel):
    """One task of a folder through both gates, for `arena envs check` (JSON-ready)."""

    task: str
    ok: bool
    skipped: str = ""
    gold_ok: bool = True
    gold: str = ""
    adversary: str = ""
    # The non-working agents that earned something on the task (each a reason to reject it).
    paid: list[str] = []


async def gate_tasks(
    env: Any, tasks: list[Task], *, sandbox: CheckSandbox | None = None
) -> list[TaskGateRecord]:
    """Both gates for every task of an environment; tasks with rubric checks need a judge and are skipped."""
    records: list[TaskGateRecord] = []
    for task in tasks:
        if task.needs_judge:
            why = f"has a rubric check: run `arena tasks replay {task.full_id} --judge MODEL`"
            records.append(TaskGateRecord(task=task.full_id, ok=True, skipped=why))
            continue
        report = await run_gates(env, task, sandbox=sandbox)
        records.append(
            TaskGateRecord(
                task=task.full_id,
                ok=report.ok,
                gold_ok=report.gold.ok,
                gold=report.gold.detail,
                adversary=report.adversary.detail,
                paid=[a.agent for a in report.adversary.agents if a.paid],
            )
        )
    return records
