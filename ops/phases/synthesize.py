"""SYNTHESIZE: the round's training tasks, per environment, within PLAN's budget.

Weak training environments get targeted graph tasks following PLAN's guidelines (walks biased to
the guideline's tools, its failure pattern and skill given to the writer); the others get plain
graph tasks at their curriculum difficulty. Every task passes the gates (duplicate, stability,
gold, empty); acceptance per gate goes to `arena_synthesis_gate_total`. Tasks are stored with the
round (and reused if the phase restarts); the output lists their ids for TRAIN.
"""

from __future__ import annotations

from typing import Any

import structlog

from ops.phases.base import BasePhase, PhaseContext
from ops.phases.runtime import load_envs, sandbox_pool
from ops.phases.tasks import graph_tasks, save_tasks, stored_tasks

log = structlog.get_logger(__name__)


class SynthesizePhase(BasePhase):
    """Training tasks for this round."""

    name = "synthesize"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        from arena.synth.targeted import Guideline
        from curriculum.state import CurriculumState

        plan = ctx.previous.get("plan", {})
        budget: dict[str, int] = plan.get("allocation", {}).get("tasks", {})
        envs = load_envs(ctx)
        budget = {e: int(n) for e, n in sorted(budget.items()) if e in envs and int(n) > 0}
        if not budget:
            return {"tasks": [], "skipped": "no task budget from PLAN"}
        state = CurriculumState.model_validate(plan.get("state", {}))
        guidelines = {g["env"]: Guideline.model_validate(g) for g in plan.get("guidelines", [])}
        have = await stored_tasks(ctx, list(budget), ("graph", "targeted"))
        helper = await ctx.models.helper() if ctx.config.synthesis.writer == "model" else None
        # Distractor tools come from environments the policy does not train on in this round.
        pool_names = [f"{n}/{t}" for n, e in sorted(envs.items()) if n not in budget for t in e.tool_names]
        reports: list[dict[str, Any]] = []
        tasks: list[Any] = []
        needs_pool = any(envs[e].sandboxed for e in budget)
        async with sandbox_pool(ctx, needed=needs_pool) as pool:
            for done, (name, n) in enumerate(budget.items()):
                await ctx.safe_point()
                ctx.progress(done, len(budget), f"synthesizing for {name}")
                if name in have:
                    tasks.extend(have[name])
                    continue
                record = state.envs.get(name)
                fresh = await graph_tasks(
                    ctx,
                    envs[name],
                    n,
                    seed=ctx.seed,
                    difficulty=record.difficulty if record is not None else None,
                    sandbox=pool,
                    helper=helper,
                    guideline=guidelines.get(name),
                    distractor_pool=pool_names,
                    reports=reports,
                )
                await save_tasks(ctx, fresh)
                tasks.extend(fresh)
        ctx.progress(len(budget), len(budget))
        kept = sum(r["kept"] for r in reports)
        requested = sum(r["requested"] for r in reports)
        return {
            "tasks": [{"id": t.full_id, "env": t.env, "origin": t.origin} for t in tasks],
            "targeted": sum(t.origin == "targeted" for t in tasks),
            "budget": budget,
            "acceptance": kept / requested if requested else None,
            "synthesis": reports,
        }
