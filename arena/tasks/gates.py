"""The two gates every task must pass before use (DESIGN §4).

- gold gate: replaying the reference solution (calls, then the reference answer) passes every
  check, i.e. scores 1.0 before penalties. The expected state for `state_match` comes from a
  *second*, independent replay, so a tool that is not deterministic fails the gate here instead
  of failing every agent later.
- empty gate: an episode where the agent does nothing (no calls, empty answer) must not pass;
  otherwise the checks test nothing (EnvScaler's worked example has such checks).

Tasks of simulated environments cannot be replayed (no state, tools played by a model); their
gold transcript carries the reference calls without results, and only answer/rubric checks make
sense for them.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from arena.protocols import ChatModel
from arena.tasks.model import Task
from arena.tasks.replay import (
    ReferenceReplayError,
    first_failure,
    new_instance,
    reference_state,
    replay_reference,
)
from arena.tasks.reward import RewardConfig, Verdict
from arena.tasks.transcript import ReplayTranscript
from arena.tasks.verify import CheckSandbox, verify
from arena.types import Message, ToolCall


class GateResult(BaseModel):
    """The outcome of one gate: whether the task got through, why not, and the verdict if one was made."""

    model_config = ConfigDict(frozen=True)

    gate: Literal["gold", "empty"]
    ok: bool
    detail: str
    verdict: Verdict | None = None


class GateReport(BaseModel):
    """Both gates for one task; `ok` when the task may be used."""

    task: str
    gold: GateResult
    empty: GateResult

    @property
    def ok(self) -> bool:
        """Whether both gates let the task through."""
        return self.gold.ok and self.empty.ok


def _is_executable(env: Any) -> bool:
    return getattr(env, "kind", "executable") == "executable"


def reference_transcript(task: Task, results: list[Any] | None) -> ReplayTranscript:
    """The transcript of an agent that makes exactly the reference calls, then gives the reference answer."""
    messages = [Message(role="user", content=task.instruction)]
    for i, call in enumerate(task.reference):
        call_id = f"ref-{i + 1}"
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
    answer = task.answer or ""
    messages.append(Message(role="assistant", content=answer))
    return ReplayTranscript(messages=messages, final_answer=answer)


def empty_transcript(task: Task) -> ReplayTranscript:
    """The transcript of an agent that does nothing: the instruction, then an empty answer."""
    return ReplayTranscript(
        messages=[Message(role="user", content=task.instruction), Message(role="assistant", content="")],
        final_answer="",
    )


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
    if not _is_executable(env):
        verdict = await verify(
            task, None, reference_transcript(task, None), judge=judge, sandbox=sandbox, config=config
        )
        return _gold_result(verdict)
    try:
        instance, results = await replay_reference(env, task, sandbox=sandbox)
    except ReferenceReplayError as exc:
        return GateResult(gate="gold", ok=False, detail=str(exc))
    try:
        problem = first_failure(results)
        if problem is not None:
            return GateResult(gate="gold", ok=False, detail=problem)
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
    return _gold_result(verdict)


def _gold_result(verdict: Verdict) -> GateResult:
    failed = [c for c in verdict.checks if not c.passed]
    if failed:
        detail = "; ".join(f"{c.name}: {c.detail}" for c in failed)
        return GateResult(
            gate="gold", ok=False, detail=f"reference solution fails: {detail}", verdict=verdict
        )
    return GateResult(gate="gold", ok=True, detail="reference solution passes every check", verdict=verdict)


async def empty_gate(
    env: Any,
    task: Task,
    *,
    judge: ChatModel | None = None,
    sandbox: CheckSandbox | None = None,
    config: RewardConfig | None = None,
    expected_state: sqlite3.Connection | None = None,
) -> GateResult:
    """Verify an episode where the agent does nothing; the gate holds when it does not pass."""
    try:
        instance = new_instance(env, sandbox) if _is_executable(env) else None
    except ReferenceReplayError as exc:
        return GateResult(gate="empty", ok=False, detail=str(exc))
    try:
        verdict = await verify(
            task,
            instance,
            empty_transcript(task),
            judge=judge,
            sandbox=sandbox,
            config=config,
            env=env,
            expected_state=expected_state,
        )
    finally:
        if instance is not None:
            await instance.aclose()
    if verdict.passed:
        return GateResult(
            gate="empty",
            ok=False,
            detail="an agent that does nothing passes: the checks test nothing",
            verdict=verdict,
        )
    return GateResult(
        gate="empty", ok=True, detail=f"doing nothing fails ({verdict.summary()})", verdict=verdict
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
                task=task.full_id, gold=failed, empty=GateResult(gate="empty", ok=False, detail="not run")
            )
    try:
        kwargs: dict[str, Any] = {
            "judge": judge,
            "sandbox": sandbox,
            "config": config,
            "expected_state": expected,
        }
        gold = await gold_gate(env, task, **kwargs)
        empty = await empty_gate(env, task, **kwargs)
    finally:
        if expected is not None:
            expected.close()
    return GateReport(task=task.full_id, gold=gold, empty=empty)
