"""EVALUATE: the policy on fresh tasks in the held-out arena environments; pass rates per env and category.

1. The arena: `curriculum.stratify.draw_arena` (K per top-level category, disjoint from training;
   environments SYNTHESIZE built are never drawn); the draw is part of the phase output, stored
   with the round.
2. Fresh tasks every round at each environment's current curriculum difficulty: graph synthesis
   (gated) for executable environments, the TRUSTEE task generator for simulated ones
   (`round.eval_simulated`). Tasks are stored with the round and reused if the phase restarts.
3. Episodes through `work.episode.run_and_verify` (same prompts, tool views and caps as
   training, temperature 0), stored one by one keyed by round/task/sample (`run_work_items`).
4. Beside them the yardstick (`ops.phases.yardstick`): fixed tasks at fixed levels, every tool,
   greedy; its pass rates with 95% intervals say whether the policy got better.
5. And the public yardstick: a fixed sample of BFCL multi-turn entries, scored by BFCL's rules
   (`ops.phases.public_yardstick`), and of τ²-bench's retail and airline tasks, scored by τ²'s
   reward (`ops.phases.public_tau2`), once each is imported.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import structlog
from sqlmodel.ext.asyncio.session import AsyncSession

# The submodules themselves, not through the package: `ops.phases` lists the phases, so a phase
# importing it would import itself back. Module access keeps `yardstick.measure` patchable.
import ops.phases.public_tau2 as public_tau2
import ops.phases.public_yardstick as public_yardstick
import ops.phases.yardstick as yardstick
from arena.store import EnvironmentRow, repo
from ops.phases.base import BasePhase, PhaseContext
from ops.phases.common import top_category
from ops.phases.episodes import run_work_items
from ops.phases.eval_runner import episode_concurrency, episode_runner
from ops.phases.new_envs import built_env_names
from ops.phases.outputs import EvaluateOutput
from ops.phases.public_scores import publish_metrics as publish_public_metrics
from ops.phases.runtime import load_envs, sandbox_pool, serve_live_policy, trainer_config
from ops.phases.simulated_training_gate import helper_fidelity, judge_note
from ops.phases.synth_dispatch import synthesize_for_envs
from ops.phases.synth_requests import SynthesisRequest, graph_request
from ops.phases.tasks import pick, stored_tasks
from ops.phases.yardstick_scores import publish_metrics
from ops.yardstick_history import read_latest, set_change_metrics
from trainer.rollout import episode_view
from work.jobs import WorkItem

log = structlog.get_logger(__name__)


async def difficulties(ctx: PhaseContext) -> dict[str, Any]:
    """Each environment's current curriculum difficulty (default difficulty when untracked)."""
    from arena.difficulty import Difficulty
    from curriculum.state import EnvCurriculum

    async with ctx.store.transaction() as s:
        rows = await repo.curriculum_states(s)
    out: dict[str, Difficulty] = defaultdict(Difficulty)
    for env, row in rows.items():
        if row.data:
            out[env] = EnvCurriculum.model_validate(row.data).difficulty
    return out


def arena_draw(ctx: PhaseContext, categories: dict[str, str]) -> Any:
    """The round's held-out arena and training split (`curriculum.stratify.ArenaDraw`).

    Environments SYNTHESIZE built are training only: drawing them would move the held-out set
    (and its yardstick) whenever one is added.
    """
    from curriculum import stratify

    built = built_env_names(ctx) & set(categories)
    draw = stratify.draw_arena(
        {n: c for n, c in categories.items() if n not in built},
        ctx.round,
        stratify.StratifyConfig(per_category=ctx.config.round.eval_envs_per_category),
        seed=ctx.config.daemon.seed,
    )
    draw.training = sorted({*draw.training, *built})
    return draw


class EvaluatePhase(BasePhase):
    """Pass rates of the policy on held-out arena environments."""

    name = "evaluate"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:

        envs = load_envs(ctx)
        categories = {name: top_category(env) for name, env in envs.items()}
        draw = arena_draw(ctx, categories)
        await self._record_envs(ctx, envs)
        rcfg = ctx.config.round
        candidates = [
            n
            for n in draw.arena
            if envs[n].kind == "executable" or (rcfg.eval_simulated and envs[n].kind == "simulated")
        ]
        # Executable environments first: their tasks need no helper model (cheap on CPU).
        chosen = pick(candidates, rcfg.eval_max_envs, ctx.seed, key=lambda n: envs[n].kind != "executable")
        out: dict[str, Any] = {
            "arena": draw.arena,
            "training": draw.training,
            "draw": draw.model_dump(mode="json"),
            "evaluated": chosen,
        }
        if not chosen:
            empty = {"episodes": 0, "pass_rates": {}, "category_pass_rates": {}, "note": "no arena env"}
            return EvaluateOutput.model_validate({**out, **empty}).stored()
        await serve_live_policy(ctx)
        tconf = trainer_config(ctx.config, ctx.round, temperature=0.0)
        levels = await difficulties(ctx)
        # The yardstick's environments are among the candidates (drawn once from them).
        needs_pool = any(envs[n].sandboxed for n in {*chosen, *candidates})
        async with sandbox_pool(ctx, needed=needs_pool) as pool:
            tasks, reports = await self._tasks(ctx, envs, chosen, levels, pool)
            runner, runnable, unprepared = await episode_runner(ctx, envs, tasks, episode_view(tconf), pool)
            items = [
                WorkItem(task_id=t.full_id, env=t.env, sample_idx=i, task=t.model_dump(mode="json"))
                for t in tasks
                if t.full_id in runnable
                for i in range(rcfg.eval_samples_per_task)
            ]
            stats = await run_work_items(
                ctx, items, runner, purpose="eval", concurrency=episode_concurrency(ctx)
            )
            yard_tasks, yard_levels = await yardstick.ensure_drawn(ctx, envs, candidates, pool)
            # The yardstick's environments never train, whatever a later re-draw of the arena says.
            out["training"] = [n for n in draw.training if n not in {t.env for t in yard_tasks}]
            yard = None
            policy = await yardstick.live_policy(ctx)
            if yard_tasks:
                yard = await yardstick.measure(
                    ctx, envs, yard_tasks, yard_levels, stage="live", policy=policy, pool=pool
                )
            # The public yardstick (BFCL, once imported): Arena did not write it, so it never trains.
            public = await public_yardstick.measure(ctx, stage="live", policy=policy, pool=pool)
            # τ²-bench's retail and airline tasks, once imported: the same sample every round.
            tau2 = await public_tau2.measure(ctx, stage="live", policy=policy)
        async with ctx.store.transaction() as s:
            rates = await repo.pass_rates(s, ctx.round, purpose="eval")
        by_category: dict[str, list[float]] = defaultdict(list)
        for env, rate in rates.items():
            by_category[categories.get(env, "Uncategorized")].append(rate)
        category_rates = {c: sum(v) / len(v) for c, v in by_category.items()}
        judged = sorted(n for n in chosen if envs[n].kind == "simulated")
        # Judge-scored pass rates carry the helper judge's measured agreement beside them.
        judge = {"envs": judged, **judge_note(*await helper_fidelity(ctx))} if judged else None
        output = {
            **out,
            **stats,
            "tasks": len(tasks),
            "unprepared": unprepared,
            "synthesis": reports,
            "difficulty": {n: levels[n].as_dict() for n in chosen},
            "pass_rates": rates,
            "category_pass_rates": category_rates,
            # Disclosure: the fresh pass rates saw only each task's reference tools plus this many
            # distractors (None: every tool); the yardstick always sees every tool.
            "tool_subset": tconf.tool_subset,
            "yardstick": yard,
            "public_yardstick": public.model_dump(mode="json"),
            "public_tau2": tau2.model_dump(mode="json"),
            "judge": judge,
        }
        return EvaluateOutput.model_validate(output).stored()

    async def _record_envs(self, ctx: PhaseContext, envs: dict[str, Any]) -> None:
        async with ctx.store.transaction() as s:
            for env in envs.values():
                await repo.upsert_environment(
                    s,
                    EnvironmentRow(
                        name=env.name,
                        version=env.version,
                        kind=env.kind,
                        origin=env.origin,
                        category=list(env.category),
                        path=str(env.path),
                    ),
                )

    async def _tasks(
        self, ctx: PhaseContext, envs: dict[str, Any], chosen: list[str], levels: dict[str, Any], pool: Any
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Fresh tasks per evaluated environment (the stored ones when the phase restarts)."""
        n = ctx.config.round.eval_tasks_per_env
        have = await stored_tasks(ctx, chosen, ("graph", "simulated"))
        requests = {
            name: [
                graph_request(ctx, name, n, seed=ctx.seed, difficulty=levels[name], with_helper=False)
                if envs[name].kind == "executable"
                else SynthesisRequest(
                    kind="simulated_eval", env=name, n=n, seed=ctx.seed, difficulty=levels[name]
                )
            ]
            for name in chosen
            if name not in have
        }
        made, reports = await synthesize_for_envs(ctx, envs, requests, pool)
        tasks = [t for name in chosen for t in (have[name] if name in have else made[name])]
        return tasks, reports

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        """Publish the pass rates to the metrics once the phase is committed."""
        for env, rate in output.get("pass_rates", {}).items():
            ctx.metrics.env_pass_rate.labels(environment=ctx.metrics.env(env)).set(rate)
        for category, rate in output.get("category_pass_rates", {}).items():
            ctx.metrics.category_pass_rate.labels(category=ctx.metrics.category(category)).set(rate)
        rates = list(output.get("pass_rates", {}).values())
        if rates:
            ctx.metrics.overall_pass_rate.set(sum(rates) / len(rates))
        subset = output.get("tool_subset")
        ctx.metrics.eval_tool_subset.set(-1 if subset is None else subset)
        if output.get("yardstick"):
            publish_metrics(ctx.metrics, output["yardstick"])
            latest = await read_latest(session)
            if latest is not None:
                set_change_metrics(ctx.metrics, latest)
        publish_public_metrics(ctx.metrics, output.get("public_yardstick"))
        publish_public_metrics(ctx.metrics, output.get("public_tau2"))
