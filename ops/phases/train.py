"""TRAIN: GRPO on the round's synthesized tasks (`trainer.train_round`), after an SFT warm-up when fresh.

The policy starts from the newest published checkpoint (else the base weights). A fresh policy
(no Arena lineage) is first warmed up, when `trainer.sft.enabled` is set, on the reference
trajectories of the warm-up set (`ops.phases.warmup`: the training environments' hand-written and
grounded graph tasks, never a yardstick environment's), then GRPO trains on the round's tasks. Between optimizer steps the trainer awaits the daemon's safe point
(pause/stop; on stop it checkpoints and the phase stays unfinished); `on_step` feeds the GRPO
metrics. Checkpoints live in `DATA_DIR/checkpoints/round-NNNN/{sft,grpo}`; a restarted phase
resumes from the round's newest checkpoint (the trainer does this), so committed steps are not redone.
With `trainer.processes > 1` the GRPO steps run in worker processes on that many GPUs
(`trainer.sharded`); this phase still owns the store, the helpers and the rollouts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import structlog

from arena.store import repo
from ops.phases.base import BasePhase, PhaseContext
from ops.phases.outputs import SynthesizeOutput, TrainOutput
from ops.phases.runtime import (
    current_policy_dir,
    http_publisher,
    load_envs,
    round_dir,
    sandbox_pool,
    trainer_config,
)
from ops.phases.warmup import measure_warmup, training_envs, warmup_tasks
from work.kit import episode_kit

log = structlog.get_logger(__name__)


def step_observer(ctx: PhaseContext) -> Any:
    """`on_step` for the trainer: optimizer-step records into the Prometheus metrics (thread-safe)."""

    def on_step(m: Any) -> None:
        if m.phase != "grpo":
            return
        ctx.metrics.grpo_steps.inc()
        ctx.metrics.grpo_loss.set(m.loss)
        if m.kl is not None:
            ctx.metrics.grpo_kl.set(m.kl)
        if m.entropy is not None:
            ctx.metrics.grpo_entropy.set(m.entropy)
        if m.tokens_per_s is not None:
            ctx.metrics.tokens_per_second.labels(role="policy").set(m.tokens_per_s)
        if m.reward_mean is not None:
            ctx.metrics.reward_mean.labels(phase="train").set(m.reward_mean)
        if m.reward_std is not None:
            ctx.metrics.reward_std.labels(phase="train").set(m.reward_std)
        if m.chain_breaks:
            ctx.metrics.rollout_chain_breaks.inc(m.chain_breaks)
        if m.sync_kind is not None and m.sync_bytes is not None and m.sync_seconds is not None:
            ctx.metrics.weight_sync_bytes.labels(kind=m.sync_kind).set(m.sync_bytes)
            ctx.metrics.weight_sync_seconds.labels(kind=m.sync_kind).set(m.sync_seconds)
        if m.sampler_logprob_diff is not None:
            ctx.metrics.grpo_sampler_logprob_diff.set(m.sampler_logprob_diff)
        for stat in ("mean", "min", "max", "peak"):
            ratio = getattr(m, f"importance_ratio_{stat}")
            if ratio is not None:
                ctx.metrics.grpo_importance_ratio.labels(stat=stat).set(ratio)
        ctx.progress(m.step, ctx.config.round.train_steps, f"GRPO step {m.step}")

    return on_step


def _summary(result: Any) -> dict[str, Any]:
    data = result.model_dump(mode="json", exclude={"metrics"})
    data["last_step"] = result.metrics[-1].model_dump(mode="json") if result.metrics else None
    # How far the sampler was from the trainer over the steps (`trainer.off_policy`).
    kls = [m.sampler_kl for m in result.metrics if m.sampler_kl is not None]
    peaks = [m.importance_ratio_peak for m in result.metrics if m.importance_ratio_peak is not None]
    data["kl_per_token"] = sum(kls) / len(kls) if kls else None
    data["kl_per_token_max"] = max(kls) if kls else None
    data["ratio_peak"] = max(peaks) if peaks else None
    return data


def _cluster_rollouts(ctx: PhaseContext, envs: Any, tasks: list[Any], tconf: Any, policy_dir: Any) -> Any:
    """Cluster mode with rollouts from the policy server: the episodes run on the Ray workers.

    Local rollouts sample from the trainer's own model, which only this process holds: they stay here.
    """
    if ctx.cluster is None or tconf.rollout_backend != "http":
        return None
    from ops.cluster.rollouts import cluster_rollouts

    return cluster_rollouts(ctx, envs, tasks, tconf, str(policy_dir))


class TrainPhase(BasePhase):
    """Policy updates."""

    name = "train"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        from arena.tasks.model import Task
        from trainer.grpo import train_round
        from trainer.memory import track_peak_rss
        from trainer.sft import needs_warmup, sft_warmup

        synthesized = ctx.output(SynthesizeOutput)
        wanted = synthesized.tasks if synthesized is not None else []
        if not wanted or ctx.config.round.train_steps <= 0:
            return TrainOutput(
                skipped="train_steps = 0" if wanted else "no training tasks", steps=0, checkpoint=None
            ).stored()
        async with ctx.store.transaction() as s:
            rows = [await repo.get_task(s, w.id) for w in wanted]
        tasks = [Task.model_validate(r.data) for r in rows if r is not None]
        envs = load_envs(ctx)
        tconf = trainer_config(ctx.config, ctx.round)
        policy_dir, parent = await current_policy_dir(ctx)
        out = round_dir(ctx)
        on_step = step_observer(ctx)
        result: dict[str, Any] = {"parent": parent, "parent_dir": str(policy_dir), "tasks": len(tasks)}
        needed = any(envs[t.env].sandboxed for t in tasks)
        async with track_peak_rss() as peak, sandbox_pool(ctx, needed=needed) as pool:
            if needs_warmup(policy_dir, tconf):
                warm, _ = await warmup_tasks(ctx, envs, await training_envs(ctx, envs))
                result["warmup_tasks"] = dict(sorted(Counter(t.env for t in warm).items()))
                ctx.progress(0, 0, "SFT warm-up")
                sft = await sft_warmup(
                    ctx.round,
                    warm or tasks,
                    policy_dir,
                    out / "sft",
                    tconf,
                    on_step,
                    ctx.safe_point,
                    envs=envs,
                    sandbox=pool,
                )
                log.info("train.sft_done", steps=sft.total_steps, checkpoint=str(sft.policy_dir))
                result["sft"] = _summary(sft)
                policy_dir = sft.policy_dir
                result["warmup_yardstick"] = await measure_warmup(ctx, envs, policy_dir, pool)
            ctx.progress(0, tconf.max_steps, "GRPO")
            # Simulated environments' tools, users and judge are the helper's to play (the simulator).
            kit = await episode_kit(ctx.models, envs, tasks, pool)
            grpo = await train_round(
                ctx.round,
                tasks,
                policy_dir,
                out / "grpo",
                tconf,
                on_step,
                ctx.safe_point,
                envs=envs,
                sandbox=pool,
                user=kit.user,
                judge=kit.judge,
                simulator=kit.simulator,
                # Rollouts from the policy server: it gets every update, so they stay on-policy.
                publisher=http_publisher(ctx) if tconf.rollout_backend == "http" else None,
                remote_episodes=_cluster_rollouts(ctx, envs, tasks, tconf, policy_dir),
            )
        ctx.metrics.grpo_zero_variance.inc(grpo.zero_variance_groups)
        ctx.metrics.grpo_resampled.inc(grpo.resampled_groups)
        log.info(
            "train.done",
            steps=grpo.total_steps,
            reward_mean=grpo.reward_mean,
            pass_rate=grpo.pass_rate,
            checkpoint=str(grpo.policy_dir),
        )
        return TrainOutput.model_validate(
            {
                **result,
                "grpo": _summary(grpo),
                "steps": grpo.total_steps,
                "checkpoint": str(grpo.policy_dir),
                "reward_mean": grpo.reward_mean,
                "pass_rate": grpo.pass_rate,
                # The process's resident peak over the warm-up and GRPO: what a machine must hold.
                "peak_rss_mb": peak.mb,
            }
        ).stored()
