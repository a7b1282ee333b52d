"""SYNTHESIZE: the round's training tasks, per environment, within PLAN's budget.

1. Complexification (when PLAN chose an environment, `synthesis.complexify_db`): its database grows
   by `synthesis.complexify_rows` rows into `DATA_DIR/envs/NAME`, which overrides the original
   from then on (`runtime.load_envs`); done once per round, even across restarts.
2. Targeted tasks: each of PLAN's guidelines (a weak motif mapped onto this training environment)
   gives `n_tasks` graph tasks whose walks favour the motif's tools at the knob levels the motif
   needs; its failure pattern and skill go to the writer.
3. New environments (`ops.phases.new_envs`): each one PLAN asked for is built on the helper; once
   built it gets `synthesis.tasks_per_weak_env` tasks aimed at its weak motif in this round.
4. Simulated environments (when PLAN's simulated training gate let them have budget): TRUSTEE tasks at their
   difficulty through the judged task gates (`ops.phases.simulated_training_tasks`).
5. Plain tasks: the rest of the environment's budget at the difficulties PLAN spread (the current
   level and probes ±1 on one knob), so the next PLAN can measure each knob.
Every task passes the gates; acceptance per gate goes to `arena_synthesis_gate_total`. Tasks are
stored with the round (and reused if the phase restarts). The output lists each task with its
origin, difficulty, the motif it was aimed at and the motifs it exercises, with counts per
environment, origin and motif for `arena report`.
In cluster mode steps 2, 4 and 5 run on the Ray workers, several environments at once
(`ops.phases.synth_requests`, sent by `synth_dispatch`); the daemon keeps the metrics, the yardstick
exclusion and the store.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from typing import Any

import anyio
import structlog

from arena.difficulty import Difficulty
from ops.phases.base import BasePhase, PhaseContext
from ops.phases.new_envs import build_new_envs, new_env_guidelines, report_records
from ops.phases.outputs import (
    ComplexifyRequest,
    DifficultyPoint,
    PlanOutput,
    SynthesizedTask,
    SynthesizeOutput,
)
from ops.phases.runtime import describe_sandboxed, grown_envs_dir, load_envs, sandbox_pool
from ops.phases.synth_dispatch import synthesize_for_envs
from ops.phases.synth_requests import SynthesisRequest, graph_request
from ops.phases.tasks import stored_tasks

log = structlog.get_logger(__name__)

# Seeds of a round's synthesis calls for one environment: one per difficulty point, so that task
# ids (deterministic in the seed and index) never collide between points.
_SEED_STRIDE = 7919


class SynthesizePhase(BasePhase):
    """Training tasks for this round."""

    name = "synthesize"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        plan = ctx.output(PlanOutput)
        if plan is None:  # PLAN has not run this round (a phase run on its own): nothing to make
            return SynthesizeOutput(
                tasks=[], skipped="no task budget from PLAN", complexified=[], new_envs=[]
            ).stored()
        grown = await self._complexify(ctx, plan.complexify)
        built = await build_new_envs(ctx, plan.new_envs)
        envs = load_envs(ctx)
        budget = {e: n for e, n in sorted(plan.allocation.tasks.items()) if e in envs and n > 0}
        guidelines = {g.env: g for g in plan.guidelines}
        fresh_envs = [r.name for r in built if r.ok and r.name in envs]
        await describe_sandboxed(ctx, envs, fresh_envs)  # their motifs need their write tools
        for name, guideline in new_env_guidelines(ctx, built, envs).items():
            guidelines[name] = guideline
            budget[name] = guideline.n_tasks
        if not budget:
            return SynthesizeOutput(
                tasks=[],
                skipped="no task budget from PLAN",
                complexified=grown,
                new_envs=report_records(built),
            ).stored()
        have = await stored_tasks(ctx, list(budget), ("graph", "targeted", "simulated"))
        # Distractor tools come from environments the policy does not train on in this round.
        pool_names = [f"{n}/{t}" for n, e in sorted(envs.items()) if n not in budget for t in e.tool_names]
        requests: dict[str, list[SynthesisRequest]] = {}
        for name in budget:
            if name in have:
                continue
            batch: list[SynthesisRequest] = []
            if envs[name].kind == "simulated":
                point = plan.simulated.get(name) or DifficultyPoint(n=budget[name], difficulty=Difficulty())
                batch.append(
                    SynthesisRequest(
                        kind="simulated_training",
                        env=name,
                        n=point.n,
                        seed=ctx.seed,
                        difficulty=point.difficulty,
                    )
                )
            graph = {
                "distractor_pool": pool_names,
                "with_helper": ctx.config.synthesis.writer == "model",
                "grounded": True,  # training tasks: SFT imitates their references
            }
            guideline = guidelines.get(name)
            if guideline is not None:
                batch.append(
                    graph_request(ctx, name, guideline.n_tasks, seed=ctx.seed, guideline=guideline, **graph)
                )
            for i, spot in enumerate(plan.spread.get(name, []), start=1):
                seed = ctx.seed + _SEED_STRIDE * i
                batch.append(graph_request(ctx, name, spot.n, seed=seed, difficulty=spot.difficulty, **graph))
            requests[name] = batch

        needs_pool = ctx.cluster is None and any(envs[e].sandboxed for e in requests)
        async with sandbox_pool(ctx, needed=needs_pool) as pool:
            made, reports = await synthesize_for_envs(ctx, envs, requests, pool)
        tasks = [t for name in budget for t in (have[name] if name in have else made[name])]
        kept = sum(r["kept"] for r in reports)
        requested = sum(r["requested"] for r in reports)
        listed = describe_tasks(tasks, envs, guidelines)
        return SynthesizeOutput(
            tasks=listed,
            targeted=sum(t.origin == "targeted" for t in tasks),
            budget=budget,
            counts=count_tasks(listed),
            complexified=grown,
            new_envs=report_records(built),
            acceptance=kept / requested if requested else None,
            synthesis=reports,
        ).stored()

    async def _complexify(self, ctx: PhaseContext, chosen: list[ComplexifyRequest]) -> list[dict[str, Any]]:
        """Grow each environment PLAN chose (once per round); returns what was added."""
        from arena.synth.complexify import ComplexifyError, complexify

        if not chosen or not ctx.config.synthesis.complexify_db:
            return []
        root = grown_envs_dir(ctx)
        ledger_path = root / "grown.json"
        ledger: dict[str, int] = json.loads(ledger_path.read_text()) if ledger_path.is_file() else {}
        envs = load_envs(ctx)
        out: list[dict[str, Any]] = []
        for item in chosen:
            name = item.env
            if name not in envs or ledger.get(name) == ctx.round:
                continue  # unknown now, or already grown this round before a restart
            env = envs[name]
            staging = root / ".staging" / f"{name}-r{ctx.round:04d}"
            await anyio.to_thread.run_sync(lambda p=staging: shutil.rmtree(p, ignore_errors=True))
            try:
                async with sandbox_pool(ctx, needed=env.sandboxed) as pool:
                    result = await complexify(env, staging, rows=item.rows, seed=ctx.seed, sandbox=pool)
            except ComplexifyError as exc:
                log.info("synth.complexify_skipped", env=name, reason=str(exc)[:200])
                out.append({"env": name, "added": {}, "reason": str(exc)[:200]})
                continue
            target = root / env.path.name

            def swap(src: Any = staging, dst: Any = target) -> None:
                shutil.rmtree(dst, ignore_errors=True)
                shutil.move(str(src), str(dst))

            await anyio.to_thread.run_sync(swap)
            ledger[name] = ctx.round
            ledger_path.write_text(json.dumps(ledger, sort_keys=True))
            out.append(
                {
                    "env": name,
                    "why": item.why,
                    "added": result.added,
                    "version_before": result.version_before,
                    "version_after": result.version_after,
                }
            )
            log.info("synth.complexified", env=name, added=result.added)
        return out


def describe_tasks(
    tasks: list[Any], envs: dict[str, Any], guidelines: dict[str, Any]
) -> list[SynthesizedTask]:
    """One line per task: id, env, origin, difficulty, the motif it was aimed at, the motifs it exercises."""
    from arena.synth.motifs import task_motifs

    out = []
    for t in tasks:
        env = envs.get(t.env)
        guideline = guidelines.get(t.env) if t.origin == "targeted" else None
        out.append(
            SynthesizedTask(
                id=t.full_id,
                env=t.env,
                origin=t.origin,
                difficulty=t.difficulty,
                motif=guideline.motif if guideline is not None else None,
                skill=guideline.skill if guideline is not None else None,
                exercises=task_motifs(t, env.write_tools) if env is not None else [],
            )
        )
    return out


def count_tasks(listed: list[SynthesizedTask]) -> dict[str, dict[str, int]]:
    """Counts per environment, origin, targeted motif and exercised motif."""
    return {
        "env": dict(Counter(t.env for t in listed)),
        "origin": dict(Counter(t.origin for t in listed)),
        "targeted_motif": dict(Counter(t.motif for t in listed if t.motif)),
        "exercises": dict(Counter(m for t in listed for m in t.exercises)),
    }
