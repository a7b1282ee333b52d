"""GRPO rounds with TRL's `GRPOTrainer` over Arena episodes: `train_round`.

The trainer runs in a worker thread (`anyio.to_thread.run_sync`): TRL is synchronous. Inside it,
the `RolloutBridge` (the `rollout_func`) runs the episodes of each batch back on the event loop;
a `TrainerCallback` turns TRL's logs into `StepMetrics` for `on_step`, saves checkpoints every
`save_every` steps (and at the end), pushes weights to an HTTP rollout server after each update
(and the starting weights before the first rollout, so that every batch is on-policy), and
awaits `safe_point` between optimizer steps — if that raises (the daemon's stop), the step's
checkpoint is saved, training stops and the exception propagates to the caller.

Resume: when `out_dir` already holds a checkpoint of this round, training continues from its
weights at the step after it (the optimizer state restarts), so a crash loses at most
`save_every - 1` steps. With a KL term (`beta` > 0) the reference stays the policy the round
started from, resumed or not.

With `config.processes > 1` the steps run in worker processes instead (`trainer.sharded`: FSDP
over GPUs under `accelerate launch`), with the same rollout bridge, checkpoints and result.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import structlog

from arena.protocols import ChatModel, UserSimulator
from arena.tasks.model import Task
from trainer.checkpoints import Lineage, is_peft, prune_checkpoints, save_checkpoint
from trainer.config import TrainerConfig
from trainer.grpo_model import anchor_reference_adapter, finished_round, load_start, resume_point, savable
from trainer.memory import release_memory
from trainer.metrics import (
    CheckpointInfo,
    OnStep,
    RolloutStats,
    SafePoint,
    StepMetrics,
    TaskOutcome,
    TrainResult,
    grpo_step_metrics,
)
from trainer.precision import use_bf16
from trainer.publish import WeightPublisher
from trainer.rollout import RolloutBridge, reward_from_rollout, task_prompt
from trainer.rollout_policy import http_policy_factory, local_policy_factory
from trainer.tasks import PreparedTask, prepare_tasks
from trainer.weight_sync import publish_start, sync_step

log = structlog.get_logger(__name__)


def grpo_args(
    config: TrainerConfig, out_dir: Path, *, max_steps: int, seed: int, ddp_timeout: int = 1800
) -> Any:
    """TRL's `GRPOConfig` for one run of `max_steps` optimizer steps (`ddp_timeout`: the process
    group's collective timeout, for several processes)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from trl import GRPOConfig

    cpu = not torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(out_dir / "trl"),
        per_device_train_batch_size=config.micro_batch,
        num_generations=config.group_size,
        # One generation of the whole step's groups (over all processes), trained in micro-batches; with
        # several iterations the same generation feeds that many optimizer steps (TRL keeps the old log-probs).
        gradient_accumulation_steps=config.accumulation_steps,
        num_iterations=config.iterations_per_batch,
        max_steps=max_steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=config.beta,
        epsilon=config.epsilon,
        epsilon_high=config.epsilon_high,
        loss_type=config.loss_type,
        scale_rewards=config.scale_rewards,
        max_grad_norm=config.max_grad_norm,
        max_completion_length=config.episode.max_total_tokens,
        gradient_checkpointing=config.gradient_checkpointing,
        # The loss scores at the temperature the episodes sampled at (the sampled distribution), and
        # corrects for the sampler with TRL's importance-sampling settings (`trainer.off_policy`).
        temperature=config.episode.params.temperature or 1.0,
        vllm_importance_sampling_correction=config.off_policy.enabled,
        vllm_importance_sampling_mode=config.off_policy.mode,
        vllm_importance_sampling_clip_max=config.off_policy.clip_max,
        vllm_importance_sampling_clip_min=config.off_policy.clip_min,
        use_cpu=cpu,
        # GPU: load_policy gives bfloat16 weights. CPU: fp32 weights with bf16 autocast where native.
        bf16=use_bf16(config.bf16, "cpu" if cpu else "cuda"),
        fp16=False,
        seed=seed,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        shuffle_dataset=True,
        ddp_timeout=ddp_timeout,
    )


class _Run:
    """The state of one `train_round` call, shared by the callback and the caller."""

    def __init__(
        self,
        *,
        round_id: int,
        config: TrainerConfig,
        out_dir: Path,
        parent: str,
        offset: int,
        prior_seconds: float,
        bridge: RolloutBridge,
        on_step: OnStep | None,
        safe_point: SafePoint | None,
        publisher: WeightPublisher | None,
    ) -> None:
        self.round_id = round_id
        self.config = config
        self.out_dir = out_dir
        self.parent = parent
        self.offset = offset
        self.prior_seconds = prior_seconds
        self.started = time.perf_counter()
        self.bridge = bridge
        self.on_step = on_step
        self.safe_point = safe_point
        self.publisher = publisher
        self.metrics: list[StepMetrics] = []
        self.checkpoints: list[CheckpointInfo] = []
        self.stop_error: BaseException | None = None
        self.step_started = time.perf_counter()
        self.last_saved_step = offset
        self.saved_batches = 0  # rollout batches before the last checkpoint of this call
        self.tokenizer: Any = None
        self.last_sync: Any = None  # trainer.publish.WeightSync of the step's publication, if any

    def sync(self, model: Any, step: int) -> None:
        """Bring the HTTP rollout server to this step's weights (`last_sync` says how it went)."""
        assert self.publisher is not None

        def checkpoint() -> Path:
            return self.save(model, step) if self.last_saved_step != step else self.checkpoints[-1].path

        self.last_sync = anyio.from_thread.run(
            functools.partial(
                sync_step,
                self.publisher,
                self.config,
                model,
                round_id=self.round_id,
                step=step,
                staging=self.out_dir / "sync" / f"step-{step:06d}",
                checkpoint=checkpoint,
            )
        )

    def save(self, model: Any, step: int) -> Path:
        # The checkpoint is rated on every rollout batch since the previous one, not the last batch
        # alone: one batch is G × tasks_per_step episodes of a few tasks, too noisy to pick the best.
        stats = RolloutStats.pooled(self.bridge.history[self.saved_batches :])
        lineage = Lineage(
            parent=self.parent,
            round_id=self.round_id,
            phase="grpo",
            step=step,
            total_steps=self.config.max_steps,
            reward_mean=stats.reward_mean,
            reward_std=stats.reward_std,
            pass_rate=stats.pass_rate,
            episodes=stats.episodes,
            train_seconds=self.prior_seconds + time.perf_counter() - self.started,
        )
        adapter = model if is_peft(model) else None
        path = save_checkpoint(savable(model), self.tokenizer, self.out_dir, lineage, adapter=adapter)
        prune_checkpoints(self.out_dir, keep_last=self.config.keep_last, keep_best=self.config.keep_best)
        self.checkpoints.append(CheckpointInfo(path=path, step=step, reward_mean=stats.reward_mean))
        self.last_saved_step = step
        self.saved_batches = len(self.bridge.history)
        return path


def _callback(run: _Run) -> Any:
    from transformers import TrainerCallback

    class ArenaCallback(TrainerCallback):
        """Checkpoints, weight publishing, safe points and metrics between optimizer steps."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            run.step_started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            model = kwargs["model"]
            step = run.offset + state.global_step
            last = state.global_step >= state.max_steps
            if step % run.config.save_every == 0 or last:
                run.save(model, step)
            if run.publisher is not None and run.config.rollout_backend == "http":
                run.sync(model, step)
            # Each step's rollouts and backward pass free gigabytes into glibc's heap, which keeps
            # them: a CPU learn-bench round grew to 20 GB resident by its fourth step, of which a
            # malloc_trim (called from a debugger) gave back 15.6 GB at once.
            release_memory(f"grpo step {step}")
            if run.safe_point is not None and not last:
                try:
                    anyio.from_thread.run(run.safe_point)
                except BaseException as exc:  # the daemon's stop (or a cancellation): checkpoint, then stop
                    run.stop_error = exc
                    if run.last_saved_step != step:
                        run.save(model, step)
                    control.should_training_stop = True

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if not logs or "loss" not in logs:
                return
            stats = run.bridge.history[-1] if run.bridge.history else RolloutStats()
            metrics = grpo_step_metrics(
                round_id=run.round_id,
                step=run.offset + state.global_step,
                logs=logs,
                stats=stats,
                seconds=time.perf_counter() - run.step_started,
            )
            if run.last_sync is not None:
                metrics.sync_kind = run.last_sync.kind
                metrics.sync_bytes = run.last_sync.bytes
                metrics.sync_seconds = run.last_sync.seconds
            run.last_sync = None
            run.metrics.append(metrics)
            log.info("grpo.step", **{k: v for k, v in metrics.model_dump().items() if v is not None})
            if run.on_step is not None:
                run.on_step(metrics)

    return ArenaCallback()


def _train_sync(
    model: Any, tokenizer: Any, prepared: Sequence[PreparedTask], run: _Run, max_steps: int
) -> None:
    """Build the `GRPOTrainer` and train (blocking, in a worker thread)."""
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from trainer.policy_logps import policy_token_trainer_class

    dataset = Dataset.from_list([{"prompt": task_prompt(t.key)} for t in prepared])
    args = grpo_args(run.config, run.out_dir, max_steps=max_steps, seed=run.config.seed + run.offset)
    resumed_adapter = is_peft(model)
    trainer = policy_token_trainer_class()(
        model=model,
        reward_funcs=[reward_from_rollout],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[_callback(run)],
        peft_config=None if resumed_adapter else run.config.lora.peft_config(),
        rollout_func=run.bridge,
    )
    if resumed_adapter and run.config.beta > 0:
        anchor_reference_adapter(trainer.model)
    # Our callback reports every step; Transformers' console printers would write to stdout,
    # which belongs to the command's output (`arena bench learn --json`).
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.train()


async def train_round(
    round_id: int,
    tasks: Sequence[Task],
    policy_dir: Path,
    out_dir: Path,
    config: TrainerConfig,
    on_step: OnStep | None = None,
    safe_point: SafePoint | None = None,
    *,
    envs: Any = None,
    user: UserSimulator | None = None,
    judge: ChatModel | None = None,
    sandbox: Any = None,
    publisher: WeightPublisher | None = None,
    simulator: ChatModel | None = None,
    remote_episodes: Any = None,
) -> TrainResult:
    """Run one GRPO round of `config.max_steps` optimizer steps on `tasks`, starting from `policy_dir`.

    Checkpoints go to `out_dir/checkpoints/`; the result's `policy_dir` is the last one (the next
    round's input). `envs` maps environment names to loaded environments (default: the registry);
    `user` plays the user in conversational tasks; `judge` grades rubric checks; `sandbox` runs
    synthesized environments' tools; `simulator` (the helper) plays simulated environments' tools,
    users and judge;
    `remote_episodes` (`trainer.rollout.RemoteEpisodes`) runs the episodes elsewhere (cluster mode);
    `publisher` pushes the starting weights and then every update to an HTTP rollout server (and is
    not needed for local rollouts, which sample from the trainer's own model).
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    policy_dir = Path(policy_dir)
    prepared, skipped = await prepare_tasks(
        tasks, envs, sandbox=sandbox, system_prompt=config.system_prompt, tool_subset=config.tool_subset
    )
    if not prepared:
        raise ValueError(f"no trainable tasks for round {round_id} ({len(skipped)} skipped: {skipped[:3]})")
    simulated = sorted({p.task.env for p in prepared if p.env.kind == "simulated"})
    if simulated and simulator is None:
        raise ValueError(
            f"tasks of simulated environments ({', '.join(simulated)}) need the helper as simulator"
        )
    offset, start_dir, prior_seconds = resume_point(out_dir, policy_dir, round_id)
    if offset >= config.max_steps:
        return finished_round(out_dir, round_id, started)
    factory = (
        http_policy_factory(config, served_model=lambda: getattr(publisher, "served_model", None))
        if config.rollout_backend == "http"
        else local_policy_factory(config)
    )
    if publisher is not None and config.rollout_backend == "http":
        await publish_start(publisher, config, policy_dir, start_dir, round_id=round_id, step=offset)
    outcomes: dict[str, TaskOutcome] = {}
    env_of = {p.key: p.task.env for p in prepared}

    def count(_stats: RolloutStats, episodes: list[tuple[str, Any, Any]]) -> None:
        for key, _transcript, verdict in episodes:
            o = outcomes.setdefault(key, TaskOutcome(task=key, env=env_of[key]))
            o.episodes += 1
            o.passed += bool(verdict.passed)
            o.reward_sum += float(verdict.reward)

    bridge = RolloutBridge(
        prepared,
        config,
        policy_factory=factory,
        user=user,
        judge=judge,
        sandbox=sandbox,
        simulator=simulator,
        on_rollout=count,
        remote=remote_episodes,
    )
    run = _Run(
        round_id=round_id,
        config=config,
        out_dir=out_dir,
        parent=str(policy_dir),
        offset=offset,
        prior_seconds=prior_seconds,
        bridge=bridge,
        on_step=on_step,
        safe_point=safe_point,
        publisher=publisher,
    )
    log.info(
        "grpo.start",
        round=round_id,
        tasks=len(prepared),
        skipped=len(skipped),
        steps=config.max_steps,
        from_step=offset,
        group_size=config.group_size,
        tasks_per_step=config.tasks_per_step,
        processes=config.processes,
    )
    if config.processes > 1:
        from trainer.sharded import train_sharded  # worker processes under `accelerate launch`

        await train_sharded(run, prepared, policy_dir, start_dir)
    else:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        model, tokenizer = await anyio.to_thread.run_sync(load_start, policy_dir, start_dir, config, device)
        run.tokenizer = tokenizer
        await anyio.to_thread.run_sync(
            _train_sync, model, tokenizer, prepared, run, config.max_steps - offset
        )
    if run.stop_error is not None:
        raise run.stop_error
    history = bridge.history
    rewards = [s.reward_mean * s.episodes for s in history]
    episodes = sum(s.episodes for s in history)
    final = run.checkpoints[-1].path if run.checkpoints else start_dir
    return TrainResult(
        round_id=round_id,
        phase="grpo",
        policy_dir=final,
        steps=len(run.metrics),
        resumed_from_step=offset,
        total_steps=offset + len(run.metrics),
        reward_mean=sum(rewards) / episodes if episodes else None,
        pass_rate=sum(s.pass_rate * s.episodes for s in history) / episodes if episodes else None,
        zero_variance_groups=sum(s.zero_variance_groups for s in history),
        resampled_groups=sum(s.resampled_groups for s in history),
        chain_breaks=sum(s.chain_breaks for s in history),
        groups=sum(s.groups for s in history),
        episodes=episodes,
        skipped=len(skipped),
        seconds=time.perf_counter() - started,
        prior_seconds=prior_seconds,
        checkpoints=run.checkpoints,
        metrics=run.metrics,
        processes=config.processes,
        task_outcomes=sorted(outcomes.values(), key=lambda o: o.task),
    )
