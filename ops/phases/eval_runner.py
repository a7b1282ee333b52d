"""Greedy evaluation episodes, shared by the fresh-task evaluation and the yardstick.

Both run `work.episode.run_and_verify`, as training's rollouts do (the prompts, tool views and caps
of training; the helper plays simulated environments); they differ only in the tool view: the fresh
evaluation shows what training shows (`trainer.tool_subset`), the yardstick always every tool.
"""

from __future__ import annotations

from typing import Any

import structlog

from ops.phases.base import PhaseContext
from work.episode import EpisodeView
from work.jobs import BatchRunner, EpisodeJob, Runner
from work.kit import EpisodeKit, ModelSource, episode_kit
from work.kit import episode_runner as kit_runner

log = structlog.get_logger(__name__)


async def simulated_tasks(
    models: ModelSource, round_no: int, env: Any, n: int, difficulty: Any, *, seed: int
) -> list[Any]:
    """Up to `n` tasks of a simulated environment from the TRUSTEE task generator on `models`' helper
    (failures logged), stamped with round `round_no`."""
    from simulate.simulators.common import SimulatorError
    from simulate.simulators.taskgen import TaskGenerator

    generator = TaskGenerator(await models.helper())
    out = []
    for i in range(n):
        try:
            out.append(await generator.generate(env, difficulty, seed=seed * 100 + i, round_id=round_no))
        except SimulatorError as exc:
            log.warning("eval.taskgen_failed", env=env.name, problems=exc.problems[:3])
    return out


async def episode_runner(
    ctx: PhaseContext, envs: dict[str, Any], tasks: list[Any], view: EpisodeView, pool: Any
) -> tuple[Runner | BatchRunner, set[str], list[str]]:
    """The episode runner, the task ids it can run, and a line per task that could not be prepared.

    `view.tool_subset` decides the tool view of executable tasks (None: every tool). Every
    episode, simulated or executable, goes through `run_and_verify`, as training's rollouts do:
    evaluation measures exactly what training rewards. In cluster mode the episodes run on the
    workers (prepared here too, so both sides agree on what can run); otherwise here, with a kit
    of this process's models (`work.kit`).
    """
    if ctx.cluster is not None:
        prepared, skipped = await EpisodeKit(ctx.models, envs, pool).prepare(tasks, view)
        keys = {p.key for p in prepared}
        return _cluster_runner(ctx, envs, [t for t in tasks if t.full_id in keys], view), keys, skipped
    kit = await episode_kit(ctx.models, envs, tasks, pool)
    return await kit_runner(kit, tasks, view)


def _cluster_runner(
    ctx: PhaseContext, envs: dict[str, Any], tasks: list[Any], view: EpisodeView
) -> BatchRunner:
    """Cluster mode: the same episodes on the Ray workers (`ops.cluster`), committed here."""
    weights = ctx.models.policy_weights
    job = EpisodeJob(
        round=ctx.round,
        phase=ctx.phase,
        view=view,
        policy_weights=str(weights) if weights is not None else None,
        needs_sandbox=any(envs[t.env].sandboxed for t in tasks),
        sandbox_available=ctx.sandbox_available,
        policy_replicas=_serving_policy_replicas(ctx),
    )
    return ctx.cluster.runner(job, {t.full_id: t.model_dump(mode="json") for t in tasks})


def _serving_policy_replicas(ctx: PhaseContext) -> list[str] | None:
    """The http policy's replicas that serve the live weights, as this process's pool knows them."""
    section = ctx.config.models.policy
    if section.backend != "http":
        return None
    from simulate.replicas import serving_urls

    serving = serving_urls(section.urls)
    # No client built here yet: nothing was published or dropped.
    return list(section.urls) if serving is None else serving


def episode_concurrency(ctx: PhaseContext) -> int:
    """Episodes in flight: `round.episode_concurrency` here, every worker's share in cluster mode."""
    if ctx.cluster is not None:
        return int(ctx.cluster.episode_capacity)
    return ctx.config.round.episode_concurrency
