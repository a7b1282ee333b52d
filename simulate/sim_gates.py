"""The gates a generated task of a simulated environment passes before it is trained on.

A simulated task has no reference trajectory and no programmatic checks: its reward is the judge's
verdict on its criteria. So the gates ask the judge about transcripts whose outcome is known:

- `empty`: the agent does nothing and says nothing. Judged as meeting the task: the criteria
  (or this judge) pay for nothing, and GRPO would learn to stop.
- `claim`: the agent makes no call and claims the user's whole intent is done. Judged as met: the
  reward pays for claims, the cheapest policy there is.
- `gold`: the agent calls the task's expected tools in order and reports the intent as done.
  Judged as not met: the criteria ask for something the task's own plan cannot show, so even
  honest work would earn nothing.

A task is kept only if every gate holds. A judge that gives no valid verdict fails the gate it was
asked for (a task is never kept on a judge's silence). Each gate is one judge call.
"""

from __future__ import annotations

from typing import Literal

import structlog
from pydantic import BaseModel

from arena.tasks.adversary import transcript_of
from arena.tasks.model import Task
from arena.types import ToolCall
from simulate.simenv import intent_of, task_criteria
from simulate.simulators.common import SimulatorError
from simulate.simulators.judge import TrajectoryJudge

log = structlog.get_logger(__name__)

SimGate = Literal["empty", "claim", "gold"]
SIM_GATES: tuple[SimGate, ...] = ("empty", "claim", "gold")


class SimGateResult(BaseModel):
    """One gate's outcome on one task."""

    gate: SimGate
    held: bool
    detail: str = ""


def expected_calls(task: Task) -> list[ToolCall]:
    """The calls the task generator planned, in order (arguments are the simulator's business)."""
    raw = task.difficulty.get("expected_tools")
    names = [n for n in str(raw or "").split(",") if n]
    return [ToolCall(id=f"gold-{i + 1}", name=n, arguments={}) for i, n in enumerate(names)]


def gate_transcript(task: Task, gate: SimGate) -> object:
    """The transcript of the agent each gate asks the judge about."""
    if gate == "empty":
        return transcript_of(task, [], None, "")
    if gate == "claim":
        return transcript_of(task, [], None, f"Done: {intent_of(task)}")
    return transcript_of(task, expected_calls(task), None, f"Done: {intent_of(task)}")


async def run_sim_gates(task: Task, judge: TrajectoryJudge) -> list[SimGateResult]:
    """The gates in order, stopping at the first that does not hold."""
    criteria = task_criteria(task)
    out: list[SimGateResult] = []
    for gate in SIM_GATES:
        try:
            score = await judge.score(intent_of(task), gate_transcript(task, gate), criteria)  # type: ignore[arg-type]
        except SimulatorError as exc:
            out.append(SimGateResult(gate=gate, held=False, detail=f"no valid verdict: {exc}"[:200]))
            break
        # The non-working agents must not pass; the planned work must.
        held = score.passed if gate == "gold" else not score.passed
        detail = (
            f"judge {'passed' if score.passed else 'failed'} it ({score.overall:.2f} of the criteria met)"
        )
        out.append(SimGateResult(gate=gate, held=held, detail=detail))
        if not held:
            break
    return out
