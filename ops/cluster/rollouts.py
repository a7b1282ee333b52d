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

if TYPE_CHECKING:
    from ops.phases.base import PhaseContext


async def run_rollout(
    state: Any, task: dict[str, Any], request_model: str | None, serving: list[str] | None, pool: Any
) -> tuple[Any, Any]:
    """One episode of `task` on this worker, sampled from the policy server as the trainer asks."""
    from arena.tasks.model import Task
    from ops.cluster.serving import follow_daemon
    from ops.phases.runtime import episode_helpers
    from simulate.replicas import find_shared_pool
    from trainer.rollout import run_and_verify
    from trainer.tasks import prepare_tasks

    tconf = state.job.tconf
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
    prepared = state.prepared.get(item.full_id)
    if prepared is None:
        ready, skipped = await prepare_tasks(
            [item], state.envs, sandbox=pool, system_prompt=tconf.system_prompt, tool_subset=tconf.tool_subset
        )
        if not ready:
            raise RuntimeError(f"task {item.full_id} could not be prepared on this worker: {skipped}")
        prepared = state.prepared[item.full_id] = ready[0]
    helpers = await episode_helpers(state.ctx, [item])
    simulator = await state.ctx.models.helper() if prepared.env.kind == "simulated" else None
    return await run_and_verify(  # one token session per episode
        policy, prepared, tconf, user=helpers.user, judge=helpers.judge, sandbox=pool, simulator=simulator
    )


def cluster_rollouts(
    ctx: PhaseContext, envs: dict[str, Any], tasks: list[Any], tconf: Any, tokenizer_dir: str
) -> Any:
    """The `RemoteEpisodes` that sends TRAIN's episodes to `ctx.cluster`'s workers."""
    from ops.phases.jobs import EpisodeJob
    from simulate.replicas import serving_urls

    job = EpisodeJob(
        round=ctx.round,
        phase=ctx.phase,
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
