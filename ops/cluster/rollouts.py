"""TRAIN's GRPO episodes on the cluster's workers, token-exact against the policy server.

With rollouts from the policy server (`trainer.rollout_backend = "http"`) an episode needs no
trainer state: the worker renders prompts with the policy's tokenizer, samples from the server's
current weights (the served model name the trainer's publisher gave the newest update, a LoRA
adapter's included), runs the environment and verifies. The transcript, with its token chains,
comes back to the daemon, which builds the training batch from it as from a local episode. The
trainer, its optimizer steps and every publish stay with the daemon.

Worker side: `run_rollout`. Daemon side: `cluster_rollouts`, a `trainer.rollout.RemoteEpisodes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer.config import TrainerConfig
from work.jobs import EpisodeJob
from work.kit import ModelSource

if TYPE_CHECKING:
    from ops.phases.base import PhaseContext


class RolloutJob(EpisodeJob):
    """An `EpisodeJob` of TRAIN's rollouts: the trainer's settings name the policy server to sample."""

    # Its rollout_* fields: the policy server, its replicas, served model and key (`HttpPolicy`).
    tconf: TrainerConfig


async def run_rollout(
    state: Any,
    models: ModelSource,
    task: dict[str, Any],
    request_model: str | None,
    serving: list[str] | None,
    pool: Any,
) -> tuple[Any, Any]:
    """One episode of `task` on this worker, sampled from the policy server as the trainer asks.

    `state` is the worker's state of the job (its environments, the tasks it prepared, its client
    of the policy server); `models` the worker's own, for the helper's roles."""
    from arena.tasks.model import Task
    from ops.cluster.serving import follow_daemon
    from simulate.replicas import find_shared_pool
    from work.kit import episode_kit

    tconf, view = state.job.tconf, state.job.view
    if state.rollout_policy is None:
        from trainer.checkpoints import load_tokenizer
        from trainer.rollout_policy import HttpPolicy

        if state.job.tokenizer_dir is None:
            raise ValueError("a rollout job needs the policy's tokenizer folder (tokenizer_dir)")
        state.rollout_policy = (HttpPolicy(tconf), load_tokenizer(state.job.tokenizer_dir))
    http_policy, tokenizer = state.rollout_policy
    policy = http_policy.chat(tokenizer)  # the job's one client of the policy server
    policy.request_model = request_model  # the newest update's served name, as the daemon's publisher says
    if serving is not None:
        follow_daemon(find_shared_pool([tconf.rollout_base_url, *tconf.rollout_replica_urls]), serving)
    item = Task.model_validate(task)
    kit = await episode_kit(models, state.envs, [item], pool)
    prepared = state.prepared.get(item.full_id)
    if prepared is None:
        ready, skipped = await kit.prepare([item], view)
        if not ready:
            raise RuntimeError(f"task {item.full_id} could not be prepared on this worker: {skipped}")
        prepared = state.prepared[item.full_id] = ready[0]
    return await kit.run(prepared, view, policy)  # one token session per episode


def cluster_rollouts(
    ctx: PhaseContext, envs: dict[str, Any], tasks: list[Any], tconf: TrainerConfig, tokenizer_dir: str
) -> Any:
    """The `RemoteEpisodes` that sends TRAIN's episodes to `ctx.cluster`'s workers."""
    from simulate.replicas import serving_urls
    from trainer.rollout import episode_view

    job = RolloutJob(
        round=ctx.round,
        phase=ctx.phase,
        view=episode_view(tconf),
        tconf=tconf,
        tokenizer_dir=tokenizer_dir,
        needs_sandbox=any(envs[t.env].sandboxed for t in tasks),
        sandbox_available=ctx.sandbox_available,
    )
    by_key = {t.full_id: t.model_dump(mode="json") for t in tasks}
    urls = [tconf.rollout_base_url, *tconf.rollout_replica_urls]
    send = ctx.cluster.rollouts(job)

    async def remote(key: str, policy: Any) -> tuple[Any, Any]:
        # What the daemon's publisher knows now: the newest update's served name, and which
        # replicas serve it (a replica that failed to load it must not be sampled on a worker).
        return await send(by_key[key], getattr(policy, "request_model", None), serving_urls(urls))

    return remote
