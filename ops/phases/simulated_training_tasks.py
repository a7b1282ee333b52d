"""SYNTHESIZE for simulated environments: TRUSTEE tasks through the judged task gates.

PLAN gives a simulated environment a task count and its current difficulty (only while the simulated
training gate is open, `ops.phases.simulated_training_gate`). The helper's task generator writes each task
(`simulate.simulators.taskgen`), and the judge must fail the empty and the claiming agent and pass
the planned work (`simulate.sim_gates`) before it is kept. Gate outcomes go to
`arena_synthesis_gate_total{gate="sim_<gate>"}` and kept tasks to `arena_tasks_synthesized_total`
with origin `simulated`.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import structlog

from ops.phases.synth_site import SynthesisSite

log = structlog.get_logger(__name__)


async def simulated_training_tasks(
    site: SynthesisSite,
    env: Any,
    n: int,
    difficulty: Any,
    *,
    seed: int,
    reports: list[dict[str, Any]],
) -> list[Any]:
    """Up to `n` gated tasks of simulated `env` (at most `synthesis.max_attempts` tries per task)."""
    from simulate.sim_gates import run_sim_gates
    from simulate.simulators.common import SimulatorError
    from simulate.simulators.judge import TrajectoryJudge
    from simulate.simulators.taskgen import TaskGenerator

    helper = await site.models.helper()
    generator, judge = TaskGenerator(helper), TrajectoryJudge(helper)
    started = time.perf_counter()
    kept: list[Any] = []
    rejections: Counter[str] = Counter()
    attempts = 0
    for i in range(max(1, n * site.synthesis.max_attempts)):
        if len(kept) >= n:
            break
        await site.safe_point()
        attempts += 1
        try:
            task = await generator.generate(env, difficulty, seed=seed * 100 + i, round_id=site.round)
        except SimulatorError as exc:
            rejections["taskgen"] += 1
            log.info("synth.sim_taskgen_failed", env=env.name, problems=exc.problems[:2])
            continue
        gates = await run_sim_gates(task, judge)
        for g in gates:
            site.metrics.synthesis_gate.labels(
                gate=f"sim_{g.gate}", result="accepted" if g.held else "rejected"
            ).inc()
        failed = next((g for g in gates if not g.held), None)
        if failed is not None:
            rejections[f"sim_{failed.gate}"] += 1
            log.debug("synth.sim_task_rejected", env=env.name, gate=failed.gate, detail=failed.detail)
            continue
        kept.append(task)
    site.metrics.tasks_synthesized.labels(origin="simulated").inc(len(kept))
    seconds = time.perf_counter() - started
    reports.append(
        {
            "env": env.name,
            "kind": "simulated",
            "requested": n,
            "kept": len(kept),
            "attempts": attempts,
            "rejections": dict(rejections),
            "seconds": round(seconds, 2),
        }
    )
    log.info(
        "synth.done",
        env=env.name,
        origin="simulated",
        requested=n,
        kept=len(kept),
        rejections=dict(rejections),
    )
    return kept
