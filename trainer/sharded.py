"""GRPO over several processes (GPUs): `train_sharded`, which `train_round` uses when `processes > 1`.

The daemon stays in charge of everything but the optimizer step. It writes a `ShardJob`, starts
`trainer.shard_worker` on every rank with `accelerate launch` (`trainer.shard_launch`: FSDP2
full-shard on GPUs, or data-parallel replicas) and serves the workers a coordinator on 127.0.0.1:

- rollouts: TRL calls `rollout_func` on every rank with that rank's slice of the generation batch.
  The coordinator waits for all ranks' slices, runs the whole batch through the round's
  `RolloutBridge` — token-exact episodes against the policy server, with the daemon's helpers,
  sandbox and environments, dynamic sampling and zero-variance masking over whole groups
  (a group may span ranks) — and answers each rank with its slice. Rollouts must therefore come
  from the policy server (`rollout_backend = "http"`): local rollouts would sample from a model
  the daemon does not hold (refused by `TrainerConfig`).
- steps: after each optimizer step rank 0 saves the gathered weights as a normal checkpoint and
  reports it; the coordinator publishes it to the policy server, hands the metrics to `on_step`
  and awaits `safe_point`. If that raises (the daemon's stop), the workers are told to stop: they
  end after this step, whose checkpoint is on disk, and the exception is raised here once they
  have exited, as in one process. A restarted call resumes from the newest checkpoint.

The workers never open the store; their output is `out_dir/checkpoints` and `out_dir/shard/`
(the job, the launch configuration, their log, `result.json`).

Why a coordinator of our own: the processes are started and sharded by accelerate (FSDP2) and
stepped by TRL; what no library provides is the bridge between them and the daemon: rollouts that
need the daemon's helpers, sandbox and environments, with groups that span ranks, and a publish and
a pause point after every step. Ray Train would make Ray a dependency of every deployment (it is
optional: cluster mode only), and TRL's own vLLM client knows nothing of environments.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from arena.protocols import ChatModel
from trainer.checkpoints import load_tokenizer
from trainer.rollout_policy import HttpPolicy
from trainer.shard_launch import ShardError, check_devices, gpu_count, run_workers
from trainer.shard_protocol import (
    JOB_FILE,
    RESULT_FILE,
    TOKEN_HEADER,
    RolloutReply,
    RolloutRequest,
    ShardJob,
    ShardResult,
    StepReply,
    StepReport,
)
from work.tasks import PreparedTask

log = structlog.get_logger(__name__)


@dataclass
class _Generation:
    """One generation batch being assembled from the ranks' slices."""

    keys: dict[int, list[str]] = field(default_factory=dict)
    done: anyio.Event = field(default_factory=anyio.Event)
    replies: dict[int, RolloutReply] = field(default_factory=dict)
    error: str | None = None


class ShardCoordinator:
    """The daemon's side of a multi-process round: rollouts for the ranks, their steps reported."""

    def __init__(self, run: Any, policy: ChatModel, *, pad_id: int, token: str) -> None:
        self.run = run  # trainer.grpo_run.RoundRun: bridge, on_step, safe_point, publisher, checkpoints
        self.policy = policy
        self.pad_id = pad_id
        self.token = token
        self.world = run.config.processes
        self.generations: dict[int, _Generation] = {}

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/rollout", self._rollout, methods=["POST"]),
                Route("/step", self._step, methods=["POST"]),
            ]
        )

    def close(self) -> None:
        """Release every rank still waiting for a batch (its workers are gone)."""
        for generation in self.generations.values():
            if not generation.done.is_set():
                generation.error = "the round ended before every rank asked for its rollouts"
                generation.done.set()

    def _authorized(self, request: Request) -> bool:
        return secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), self.token)

    async def _rollout(self, request: Request) -> Response:
        if not self._authorized(request):
            return JSONResponse({"error": "unknown worker"}, status_code=403)
        ask = RolloutRequest.model_validate_json(await request.body())
        generation = self.generations.setdefault(ask.call, _Generation())
        generation.keys[ask.rank] = ask.keys
        if len(generation.keys) == self.world:
            try:
                await self._sample(generation, ask.step)
            except Exception as exc:  # every waiting rank gets the reason, then the workers fail
                log.exception("shard.rollout_failed", call=ask.call)
                generation.error = f"{type(exc).__name__}: {exc}"
            finally:
                generation.done.set()
        await generation.done.wait()
        if generation.error is not None:
            return JSONResponse({"error": generation.error}, status_code=500)
        reply = generation.replies.pop(ask.rank)
        if not generation.replies:
            self.generations.pop(ask.call, None)
        return Response(reply.model_dump_json(), media_type="application/json")

    async def _sample(self, generation: _Generation, step: int) -> None:
        """The whole batch (ranks in order: TRL's global order) run at once, then cut back into slices."""
        bridge = self.run.bridge
        ranks = sorted(generation.keys)
        keys = [key for rank in ranks for key in generation.keys[rank]]
        started = time.perf_counter()
        batch = await bridge.sample(
            keys, step, self.policy
        )  # the step seeds dynamic sampling, as in one process
        output = bridge.build_output(batch, pad_id=self.pad_id, seconds=time.perf_counter() - started)
        stats = bridge.history[-1]
        start = 0
        for rank in ranks:
            end = start + len(generation.keys[rank])
            part = {name: values[start:end] for name, values in output.items()}
            generation.replies[rank] = RolloutReply(output=part, stats=stats)
            start = end

    async def _step(self, request: Request) -> Response:
        if not self._authorized(request):
            return JSONResponse({"error": "unknown worker"}, status_code=403)
        report = StepReport.model_validate_json(await request.body())
        run, metrics = self.run, report.metrics
        if report.checkpoint is not None:
            run.checkpoints.append(report.checkpoint)
            if run.publisher is not None:
                # Full weights: the policy server reloads the step's checkpoint before the next rollouts.
                sync = await run.publisher.publish(
                    report.checkpoint.path, round_id=run.round_id, step=metrics.step
                )
                if sync is not None:
                    metrics.sync_kind, metrics.sync_bytes, metrics.sync_seconds = (
                        sync.kind,
                        sync.bytes,
                        sync.seconds,
                    )
        run.metrics.append(metrics)
        log.info("grpo.step", **{k: v for k, v in metrics.model_dump().items() if v is not None})
        if run.on_step is not None:
            run.on_step(metrics)
        stop = False
        if run.safe_point is not None and not report.last:
            try:
                await run.safe_point()
            except Exception as exc:  # the daemon's stop: the workers end after this step
                run.stop_error = exc
                stop = True
        return Response(StepReply(stop=stop).model_dump_json(), media_type="application/json")


def _worker_config(config: Any) -> Any:
    """The trainer configuration the workers get: without the API keys, which only the daemon uses."""
    publish = config.publish.model_copy(update={"api_key": None})
    return config.model_copy(update={"rollout_api_key": None, "publish": publish})


async def train_sharded(
    run: Any, prepared: Sequence[PreparedTask], policy_dir: Path, start_dir: Path
) -> ShardResult:
    """Train `run.config.max_steps - run.offset` steps in `run.config.processes` worker processes.

    Fills `run.metrics`, `run.checkpoints` and (on a stop) `run.stop_error` as the one-process path
    does; returns what the workers reported (which ranks trained what).
    """
    from simulate.serve import serving

    config = run.config
    gpus = gpu_count()
    check_devices(config, gpus)
    tokenizer = await anyio.to_thread.run_sync(load_tokenizer, start_dir)
    run.tokenizer = tokenizer
    served = run.publisher
    policy = HttpPolicy(config, served_model=lambda: getattr(served, "served_model", None)).chat(tokenizer)
    token = secrets.token_urlsafe(24)
    coordinator = ShardCoordinator(run, policy, pad_id=int(tokenizer.pad_token_id or 0), token=token)
    job_dir = run.out_dir / "shard"
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / RESULT_FILE).unlink(missing_ok=True)
    async with serving(coordinator.app()) as url:
        job = ShardJob(
            round_id=run.round_id,
            task_keys=[p.key for p in prepared],
            policy_dir=policy_dir,
            start_dir=start_dir,
            out_dir=run.out_dir,
            offset=run.offset,
            prior_seconds=run.prior_seconds,
            max_steps=config.max_steps - run.offset,
            config=_worker_config(config),
            coordinator=url,
            token=token,
        )
        job_file = job_dir / JOB_FILE
        job_file.touch(mode=0o600)  # it carries the coordinator's token
        job_file.write_text(job.model_dump_json(indent=2))
        try:
            await run_workers(job_dir, job_file, config, gpus)
        finally:
            coordinator.close()
    result_file = job_dir / RESULT_FILE
    if not result_file.is_file():
        raise ShardError(f"the GRPO workers exited without {result_file}")
    result = ShardResult.model_validate_json(result_file.read_text())
    log.info(
        "shard.done",
        processes=len(result.ranks),
        steps=result.steps,
        stopped=result.stopped,
        sequences=[r.sequences for r in result.ranks],
        distributed=result.ranks[0].distributed_type if result.ranks else None,
    )
    return result
