"""GRPO rounds with TRL's `GRPOTrainer` over Arena episodes: `train_round`.

The trainer runs in a worker thread (`anyio.to_thread.run_sync`): TRL is synchronous. Inside it,
the `RolloutBridge` (the `rollout_func`) runs the episodes of each batch back on the event loop;
a `TrainerCallback` (`trainer.grpo_run`) turns TRL's logs into `StepMetrics` for `on_step`, saves
checkpoints every `save_every` steps (and at the end), pushes weights to an HTTP rollout server
after each update (and the starting weights before the first rollout, so that every batch is
on-policy), and awaits `safe_point` between optimizer steps — if that raises (the daemon's stop), the step's
checkpoint is saved, training stops and the exception propagates to the caller.

Resume: when `out_dir` already holds a checkpoint of this round, training continues from its
weights at the step after it (the optimizer state restarts), so a crash loses at most
`save_every - 1` steps. With a KL term (`beta` > 0) the reference stays the policy the round
started from, resumed or not.

The loss trains what the rollouts sampled: with grammar-constrained tool calls, the tokens the
grammar forced are out of the loss, and the others are scored as the sampler recorded them (the
choice and why: `trainer.policy_logps`).

With `config.processes > 1` the steps run in worker processes instead (`trainer.sharded`: FSDP
over GPUs under `accelerate launch`), with the same rollout bridge, checkpoints and result.
"""

from __future__ import annotations

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
from trainer.checkpoints import is_peft
from trainer.config import TrainerConfig
from trainer.grpo_model import anchor_reference_adapter, finished_round, load_start, resume_point
from trainer.grpo_run import RoundRun, step_callback
from trainer.metrics import (
    OnStep,
    RolloutStats,
    SafePoint,
    TaskOutcome,
    TrainResult,
)
from trainer.precision import use_bf16
from trainer.publish import WeightPublisher
from trainer.rollout import RolloutBridge, reward_from_rollout, task_prompt
from trainer.rollout_policy import HttpPolicy, local_policy_factory
from trainer.samples import infra_error
from trainer.weight_sync import publish_start
from work.tasks import PreparedTask, prepare_tasks

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


def _train_sync(
    model: Any, tokenizer: Any, prepared: Sequence[PreparedTask], run: RoundRun, max_steps: int
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
        callbacks=[step_callback(run)],
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


def fit_step_to_tasks(config: TrainerConfig, tasks: int) -> TrainerConfig:
    """`config` with no more groups per step than there are tasks.

    The trainer draws `tasks_per_step` distinct prompts for a step and drops a step it cannot fill:
    a round of one task under two groups per step would train nothing. A step of fewer groups
    still trains; where that batch cannot split as configured (several processes), the round is
    refused with the reason instead of silently training nothing.
    """
    if tasks >= config.tasks_per_step:
        return config
    fitted = config.model_copy(update={"tasks_per_step": tasks})
    try:
        fitted._check()
    except ValueError as exc:
        raise ValueError(
            f"{tasks} trainable task(s) cannot fill a GRPO step of {config.tasks_per_step} groups: {exc}"
        ) from None
    log.info("grpo.step_fitted", tasks=tasks, tasks_per_step=tasks, configured=config.tasks_per_step)
    return fitted


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
    config = fit_step_to_tasks(config, len(prepared))
    simulated = sorted({p.task.env for p in prepared if p.env.kind == "simulated"})
    if simulated and simulator is None:
        raise ValueError(
            f"tasks of simulated environments ({', '.join(simulated)}) need the helper as simulator"
        )
    offset, start_dir, prior_seconds = resume_point(out_dir, policy_dir, round_id)
    if offset >= config.max_steps:
        return finished_round(out_dir, round_id, started)
    factory = (
        HttpPolicy(config, served_model=lambda: getattr(publisher, "served_model", None))
        if config.rollout_backend == "http"
        else local_policy_factory(config)
    )
    if publisher is not None and config.rollout_backend == "http":
        await publish_start(publisher, config, policy_dir, start_dir, round_id=round_id, step=offset)
    outcomes: dict[str, TaskOutcome] = {}
    env_of = {p.key: p.task.env for p in prepared}

    def count(_stats: RolloutStats, episodes: list[tuple[str, Any, Any]]) -> None:
        for key, transcript, verdict in episodes:
            o = outcomes.setdefault(key, TaskOutcome(task=key, env=env_of[key]))
            if infra_error(transcript):  # not the policy's doing: the curriculum does not count it
                o.infra_errors += 1
                continue
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
    run = RoundRun(
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
    pooled = RolloutStats.pooled(history)
    final = run.checkpoints[-1].path if run.checkpoints else start_dir
    return TrainResult(
        round_id=round_id,
        phase="grpo",
        policy_dir=final,
        steps=len(run.metrics),
        resumed_from_step=offset,
        total_steps=offset + len(run.metrics),
        reward_mean=pooled.reward_mean if pooled.scored else None,
        pass_rate=pooled.pass_rate if pooled.scored else None,
        zero_variance_groups=sum(s.zero_variance_groups for s in history),
        resampled_groups=sum(s.resampled_groups for s in history),
        chain_breaks=sum(s.chain_breaks for s in history),
        forced_tokens=sum(s.forced_tokens for s in history),
        groups=sum(s.groups for s in history),
        episodes=pooled.episodes,
        infra_errors=pooled.infra_errors,
        skipped=len(skipped),
        seconds=time.perf_counter() - started,
        prior_seconds=prior_seconds,
        checkpoints=run.checkpoints,
        metrics=run.metrics,
        processes=config.processes,
        task_outcomes=sorted(outcomes.values(), key=lambda o: o.task),
    )
