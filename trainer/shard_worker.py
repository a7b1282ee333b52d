"""One rank of a multi-process GRPO round: `accelerate launch … -m trainer.shard_worker JOB_FILE`.

Every rank builds the same TRL `GRPOTrainer` as a one-process round (`trainer.grpo.grpo_args`,
the policy-token subclass) and trains its share of each batch; accelerate wraps the model (FSDP2
full-shard on GPUs, or DDP replicas) from the launch configuration. The rank's `rollout_func`
asks the daemon's coordinator for its slice of the generation batch (`RemoteRollouts`): the
daemon runs the episodes against the policy server, so the workers need no helper model, no
sandbox and no store.

Between optimizer steps (`ShardCallback`): every rank joins the full state dict's gathering
(FSDP's weights are spread over the ranks), rank 0 saves it as a normal checkpoint in
`out_dir/checkpoints` and reports the step; the daemon publishes it to the policy server, runs its
safe point and answers whether to stop, which rank 0 broadcasts so that all ranks stop after the
same step.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import structlog

from trainer.checkpoints import Lineage, prune_checkpoints, save_checkpoint
from trainer.metrics import CheckpointInfo, RolloutStats, grpo_step_metrics
from trainer.shard_protocol import (
    RESULT_FILE,
    TOKEN_HEADER,
    RankInfo,
    RolloutReply,
    RolloutRequest,
    ShardJob,
    ShardResult,
    StepReply,
    StepReport,
)

log = structlog.get_logger(__name__)

# Rollouts of a whole batch can take many minutes (long episodes, a busy policy server).
_ROLLOUT_TIMEOUT_S = 6 * 3600.0
_PAUSE_TIMEOUT_S = 30 * 24 * 3600  # a paused daemon holds the workers between two steps


class Coordinator:
    """The daemon's coordinator as seen from a worker (blocking HTTP: TRL calls from its own thread)."""

    def __init__(self, job: ShardJob) -> None:
        self.http = httpx.Client(
            base_url=job.coordinator,
            headers={TOKEN_HEADER: job.token},
            timeout=httpx.Timeout(_ROLLOUT_TIMEOUT_S, connect=30.0),
        )

    def rollout(self, request: RolloutRequest) -> RolloutReply:
        response = self.http.post("/rollout", content=request.model_dump_json())
        _raise_for(response, "rollout")
        return RolloutReply.model_validate_json(response.content)

    def step(self, report: StepReport) -> StepReply:
        # No read timeout: the answer comes after the daemon's safe point, which waits out a pause.
        response = self.http.post(
            "/step", content=report.model_dump_json(), timeout=httpx.Timeout(None, connect=30.0)
        )
        _raise_for(response, "step")
        return StepReply.model_validate_json(response.content)


def _raise_for(response: httpx.Response, what: str) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"the daemon refused the {what} ({response.status_code}): {response.text[:500]}")


class RemoteRollouts:
    """TRL's `rollout_func` on one rank: this rank's prompts in, its slice of the batch out."""

    def __init__(self, coordinator: Coordinator, rank: int) -> None:
        self.coordinator = coordinator
        self.rank = rank
        self.calls = 0
        self.sequences = 0
        self.history: list[RolloutStats] = []  # the whole batch's statistics, one per generation

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        from trainer.rollout import prompt_key

        request = RolloutRequest(
            rank=self.rank,
            call=self.calls,
            step=int(getattr(trainer.state, "global_step", 0)),
            keys=[prompt_key(p) for p in prompts],
        )
        self.calls += 1
        reply = self.coordinator.rollout(request)
        self.history.append(reply.stats)
        self.sequences += len(request.keys)
        return reply.output


class _Gathered:
    """A model to `save_checkpoint` whose weights are the full state dict gathered from every rank."""

    def __init__(self, model: Any, state_dict: dict[str, Any]) -> None:
        self.model = model
        self.state_dict = state_dict

    def save_pretrained(self, path: str, **kwargs: Any) -> None:
        self.model.save_pretrained(path, state_dict=self.state_dict, **kwargs)


def _callback(job: ShardJob, coordinator: Coordinator, rollouts: RemoteRollouts, tokenizer: Any) -> Any:
    from transformers import TrainerCallback

    class ShardCallback(TrainerCallback):
        """Checkpoint (gathered on rank 0), step report and the daemon's stop, between optimizer steps."""

        def __init__(self) -> None:
            self.trainer: Any = None  # set once the trainer exists (its accelerator gathers the weights)
            self.started = time.perf_counter()
            self.step_started = self.started
            self.saved_batches = 0
            self.checkpoint: CheckpointInfo | None = None
            self.stopped = False

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.step_started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # Every step is saved: the policy server reloads it before the next rollouts (full
            # weights; LoRA is one-process only), and a stop then finds the step's checkpoint.
            accelerator = self.trainer.accelerator
            state_dict = accelerator.get_state_dict(self.trainer.model)  # collective: every rank joins
            self.checkpoint = None
            if accelerator.is_main_process:
                self.checkpoint = self._save(accelerator.unwrap_model(self.trainer.model), state_dict, state)
            accelerator.wait_for_everyone()

        def _save(self, model: Any, state_dict: dict[str, Any], state: Any) -> CheckpointInfo:
            step = job.offset + state.global_step
            stats = RolloutStats.pooled(rollouts.history[self.saved_batches :])
            lineage = Lineage(
                parent=str(job.policy_dir),
                round_id=job.round_id,
                phase="grpo",
                step=step,
                total_steps=job.config.max_steps,
                reward_mean=stats.reward_mean,
                reward_std=stats.reward_std,
                pass_rate=stats.pass_rate,
                episodes=stats.episodes,
                train_seconds=job.prior_seconds + time.perf_counter() - self.started,
                extra={"processes": job.config.processes, "sharding": job.config.sharding},
            )
            path = save_checkpoint(_Gathered(model, state_dict), tokenizer, job.out_dir, lineage)
            prune_checkpoints(job.out_dir, keep_last=job.config.keep_last, keep_best=job.config.keep_best)
            self.saved_batches = len(rollouts.history)
            return CheckpointInfo(path=path, step=step, reward_mean=stats.reward_mean)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            # Every rank logs the same (gathered) values, so every rank takes this branch alike.
            if not logs or "loss" not in logs:
                return
            from accelerate.utils import broadcast_object_list

            accelerator = self.trainer.accelerator
            decision = [False]
            if accelerator.is_main_process:
                metrics = grpo_step_metrics(
                    round_id=job.round_id,
                    step=job.offset + state.global_step,
                    logs=logs,
                    stats=rollouts.history[-1] if rollouts.history else RolloutStats(),
                    seconds=time.perf_counter() - self.step_started,
                )
                last = state.global_step >= state.max_steps
                report = StepReport(metrics=metrics, checkpoint=self.checkpoint, last=last)
                decision = [coordinator.step(report).stop]
            broadcast_object_list(decision, from_process=0)
            if decision[0]:
                self.stopped = True
                control.should_training_stop = True

    return ShardCallback()


def _rank_info(accelerator: Any, rollouts: RemoteRollouts) -> RankInfo:
    return RankInfo(
        rank=accelerator.process_index,
        world_size=accelerator.num_processes,
        pid=os.getpid(),
        device=str(accelerator.device),
        distributed_type=str(accelerator.distributed_type).rsplit(".", 1)[-1],
        sequences=rollouts.sequences,
    )


def run(job: ShardJob, job_dir: Path) -> None:
    """Train this rank's share of the job (blocking, in the launched process)."""
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from trainer.grpo import grpo_args
    from trainer.grpo_model import load_start
    from trainer.policy_logps import policy_token_trainer_class
    from trainer.rollout import reward_from_rollout, task_prompt

    config = job.config
    # Under FSDP, accelerate checkpoints activations itself (`fsdp_activation_checkpointing` in the
    # launch configuration); Transformers refuses both at once.
    trl_config = (
        config.model_copy(update={"gradient_checkpointing": False}) if config.sharding == "fsdp" else config
    )
    # The arguments set up the process group (accelerate's state), so they come before the model.
    # Ranks wait in collectives while the daemon pauses at a step's safe point (rank 0 waits for its
    # answer) — for as long as the pause lasts, not torch's default 30 minutes.
    args = grpo_args(
        trl_config,
        job.out_dir,
        max_steps=job.max_steps,
        seed=config.seed + job.offset,
        ddp_timeout=_PAUSE_TIMEOUT_S,
    )
    # Every weight takes part in every forward (masked-out micro-batches run a one-token forward):
    # DDP need not search the graph for unused ones after each backward.
    args.ddp_find_unused_parameters = False
    rank = args.process_index
    structlog.contextvars.bind_contextvars(rank=rank)
    # Every rank loads the weights on CPU; accelerate shards (FSDP) or places (DDP) them.
    model, tokenizer = load_start(job.policy_dir, job.start_dir, config, "cpu")
    coordinator = Coordinator(job)
    rollouts = RemoteRollouts(coordinator, rank)
    callback = _callback(job, coordinator, rollouts, tokenizer)
    trainer = policy_token_trainer_class()(
        model=model,
        reward_funcs=[reward_from_rollout],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": task_prompt(key)} for key in job.task_keys]),
        processing_class=tokenizer,
        callbacks=[callback],
        rollout_func=rollouts,
    )
    callback.trainer = trainer
    trainer.remove_callback(PrinterCallback)  # stdout is the worker log; our callback reports the steps
    trainer.remove_callback(ProgressCallback)
    log.info("shard.start", world_size=args.world_size, distributed=str(trainer.accelerator.distributed_type))
    trainer.train()
    from accelerate.utils import gather_object

    ranks = gather_object([_rank_info(trainer.accelerator, rollouts)])
    if trainer.accelerator.is_main_process:
        result = ShardResult(ranks=ranks, steps=trainer.state.global_step, stopped=callback.stopped)
        (job_dir / RESULT_FILE).write_text(result.model_dump_json(indent=2))
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()


def main(argv: list[str]) -> int:
    """Entry point: `python -m trainer.shard_worker JOB_FILE` under `accelerate launch`."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    job_file = Path(argv[1])
    run(ShardJob.model_validate_json(job_file.read_text()), job_file.parent)
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    # The work is done and its result written: leave without running C++ static destructors.
    # A CPU worker sometimes aborted there ("terminate called without an active exception", a
    # joinable thread of the process group torn down at exit), which failed a finished round.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
