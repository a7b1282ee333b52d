"""The simulated training gate: whether simulated environments may be trained on this round.

Trust follows fidelity: a simulated environment's reward is the helper's judgement, so GRPO on it
learns whatever the judge lets pass. `arena bench sim --save` measures the helper's judge against
the programmatic verifier on executable episodes and stores the false-pass rate (judge passes,
verifier fails) with the helper's identity. PLAN gives simulated environments training budget
only while that rate is below `simulation.max_false_pass`; an unmeasured helper is not trusted
(except with the gate set to 1, which opens it). The decision and its evidence are stored with
PLAN's output (`simulated_training_gate`), and a withheld budget is a `simulated.withheld` event,
so `arena report` and the event log say why. Not to be confused with the task gates a simulated
task passes in SYNTHESIZE (`simulate.sim_gates`) or the publish gate (`trainer.publish_gate`).
Rounds stored before the rename carry it as `cheap_gate` and the event as `cheap.withheld`;
`ops.report` reads either key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ops.phases.base import PhaseContext


class SimulatedTrainingGate(BaseModel):
    """The decision and what it rests on."""

    open: bool
    helper: str
    why: str
    false_pass: float | None = None
    false_pass_interval: tuple[float, float] | None = None
    agreement: float | None = None
    measured_at: str | None = None
    limit: float


async def helper_fidelity(ctx: PhaseContext) -> tuple[str, Any]:
    """The configured helper's identity and its latest stored fidelity row (None: unmeasured).

    Also publishes the row's judge agreement and false-pass rate as gauges (-1 when unmeasured),
    shown beside the judge-scored pass rates on the dashboard.
    """
    from arena.store.fidelity import latest_fidelity

    helper = ctx.config.models.helper.identity()
    async with ctx.store.transaction() as s:
        row = await latest_fidelity(s, helper)
    measured = row is not None and row.false_pass is not None
    ctx.metrics.helper_judge_false_pass.set(row.false_pass if measured else -1)  # type: ignore[union-attr]
    agreement = row.judge_agreement if row is not None else None
    ctx.metrics.helper_judge_agreement.set(agreement if agreement is not None else -1)
    return helper, row


def judge_note(helper: str, row: Any) -> dict[str, Any]:
    """What a judge-scored figure carries beside it: whose judge, and how far it was measured to agree."""
    if row is None or row.judge_agreement is None:
        return {"helper": helper, "agreement": None, "note": "judge not measured (arena bench sim --save)"}
    return {
        "helper": helper,
        "agreement": row.judge_agreement,
        "agreement_interval": (row.agreement_low, row.agreement_high),
        "false_pass": row.false_pass,
        "episodes": row.episodes,
        "measured_at": str(row.measured_at),
    }


async def simulated_training_gate(ctx: PhaseContext) -> SimulatedTrainingGate:
    """The gate for this round's PLAN, from the stored fidelity of the configured helper."""
    limit = ctx.config.simulation.max_false_pass
    helper, row = await helper_fidelity(ctx)
    measured: dict[str, Any] = {}
    if row is not None and row.false_pass is not None:
        measured = {
            "false_pass": row.false_pass,
            "false_pass_interval": (row.false_pass_low, row.false_pass_high),
            "agreement": row.judge_agreement,
            "measured_at": str(row.measured_at),
        }
    if limit >= 1.0:
        return SimulatedTrainingGate(
            open=True, helper=helper, limit=limit, why="simulation.max_false_pass = 1", **measured
        )
    if row is None or row.false_pass is None:
        why = (
            f"the helper {helper} has no measured judge false-pass rate "
            "(run `arena bench sim --save` with this configuration)"
        )
        return SimulatedTrainingGate(open=False, helper=helper, limit=limit, why=why)
    ok = row.false_pass < limit
    why = (
        f"the helper's judge false-pass rate {row.false_pass:.2f} "
        f"[{row.false_pass_low or 0:.2f}, {row.false_pass_high or 1:.2f}] over {row.episodes} episodes is "
        f"{'below' if ok else 'not below'} simulation.max_false_pass {limit:g}"
    )
    return SimulatedTrainingGate(open=ok, helper=helper, limit=limit, why=why, **measured)
