"""One stage of the learning benchmark: record its training, evaluate its policy, reuse finished work.

A killed `arena bench learn` rerun into the same folder finds each stage's record (`StageStore`):
an evaluation of the same weights under the same tasks and settings is not run again, and the time
of whatever is reused is reported so the time target is judged on the whole demonstration.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from simulate.precision import resolve_dtype
from trainer.checkpoints import load_policy
from trainer.config import TrainerConfig
from trainer.evaluate import EvalReport, evaluate
from trainer.memory import release_memory, track_peak_rss
from trainer.metrics import TrainResult
from trainer.stage_store import StageRecord, StageStore, evaluation_key, weights_signature

if TYPE_CHECKING:
    from trainer.learn_bench import LearnBenchConfig


def eval_config(config: LearnBenchConfig) -> TrainerConfig:
    """The trainer config every stage is evaluated with: the training caps, the evaluation sampling."""
    return config.trainer.with_sampling(temperature=config.eval_temperature, logprobs=False)


def eval_key(prepared: list[Any], config: LearnBenchConfig) -> str:
    """What an evaluation depends on besides the weights: tasks, their view, episode settings."""
    cfg = eval_config(config)
    settings = {
        "samples": config.eval_samples,
        "episode": cfg.episode.model_dump(mode="json"),
        "system_prompt": cfg.system_prompt,
        "tool_subset": cfg.tool_subset,
        "rollout_dtype": cfg.rollout_dtype,
        "chat_template_kwargs": cfg.chat_template_kwargs,
    }
    return evaluation_key([p.fingerprint for p in prepared], settings)


async def evaluate_dir(policy_dir: Path, prepared: list[Any], config: LearnBenchConfig) -> EvalReport:
    """Evaluate the policy in `policy_dir` on `prepared`, in the dtype the rollouts sample in."""
    from simulate.local import LocalChatModel

    # bfloat16 where native: the same dtype for every stage, so only the weights differ.
    dtype = resolve_dtype(config.trainer.rollout_dtype, "cpu")
    async with track_peak_rss() as peak:
        model, tokenizer = await anyio.to_thread.run_sync(
            functools.partial(load_policy, policy_dir, dtype=dtype)
        )
        model.eval()
        chat = LocalChatModel(
            model,
            tokenizer,
            name=policy_dir.name,
            max_batch=config.trainer.max_batch,
            chat_template_kwargs=config.trainer.chat_template_kwargs,
        )
        try:
            report = await evaluate(chat, prepared, eval_config(config), samples=config.eval_samples)
        finally:
            del chat, model
            release_memory(f"evaluated {policy_dir.name}")
    return report.model_copy(update={"peak_rss_mb": peak.mb})


async def run_stage(
    stage: str,
    policy_dir: Path,
    trained: TrainResult | None,
    prepared: list[Any],
    config: LearnBenchConfig,
    store: StageStore,
    say: Callable[[str], None],
    *,
    train_peak_rss_mb: int | None = None,
    reused: dict[str, float] | None = None,
) -> StageRecord:
    """Record the stage's training, evaluate its policy; reuse what a killed earlier run finished.

    The time of what was reused (the earlier run's training, its evaluation) goes into `reused`.
    """
    reused = {} if reused is None else reused
    record = store.load(stage, policy_dir)
    if record is not None and trained is not None and trained.steps == 0 and record.train_steps:
        reused[f"{stage} training"] = record.train_seconds
    elif trained is not None and trained.prior_seconds:
        # A resumed round: the steps before the resume ran in an earlier invocation.
        reused[f"{stage} training before the resume"] = trained.prior_seconds
    if record is None or (trained is not None and trained.steps > 0):
        record = StageRecord(stage=stage, policy=str(policy_dir), weights=weights_signature(policy_dir))
        if trained is not None:
            record.train_seconds = trained.prior_seconds + trained.seconds
            record.train_steps = max(trained.total_steps, trained.steps)
            record.train_peak_rss_mb = train_peak_rss_mb
            record.groups, record.zero_variance_groups = trained.groups, trained.zero_variance_groups
            record.resampled_groups = trained.resampled_groups
            record.forced_tokens = trained.forced_tokens
            record.kl_per_token, record.kl_per_token_max = _mean_max([m.sampler_kl for m in trained.metrics])
            record.ratio_peak = _mean_max([m.importance_ratio_peak for m in trained.metrics])[1]
            record.reference_kl = _mean_max([m.kl for m in trained.metrics])[0]
        store.save(record)
    key = eval_key(prepared, config)
    if record.eval is not None and record.eval_key == key:
        say(f"{stage}: evaluation reused from {store.folder}")
        reused[f"{stage} evaluation"] = record.eval.seconds
        return record
    record.eval, record.eval_key = await evaluate_dir(policy_dir, prepared, config), key
    store.save(record)
    return record


def _mean_max(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and largest of the known values (None, None without any)."""
    known = [v for v in values if v is not None]
    return (sum(known) / len(known), max(known)) if known else (None, None)


async def all_tools_evaluations(
    policies: list[tuple[str, Path]],
    eval_tasks: list[Any],
    keep: set[str],
    envs: Any,
    config: LearnBenchConfig,
    store: StageStore,
    say: Callable[[str], None],
    *,
    reused: dict[str, float],
) -> dict[str, EvalReport]:
    """Each stage's policy on the held-out tasks (those in `keep`) with every tool shown.

    The benchmark's main figures show each task its reference tools plus `trainer.tool_subset`
    distractors, a help the policy does not get where it is deployed; these say what it does
    without it. Recorded as stages of their own (`<stage>-all-tools`), so a rerun reuses them.
    """
    from trainer.tasks import prepare_tasks

    full = config.model_copy(update={"trainer": config.trainer.model_copy(update={"tool_subset": None})})
    prepared, _ = await prepare_tasks(
        [t for t in eval_tasks if t.full_id in keep], envs, system_prompt=full.trainer.system_prompt
    )
    out: dict[str, EvalReport] = {}
    for stage, policy_dir in policies:
        say(f"evaluating {stage} with every tool")
        record = await run_stage(
            f"{stage}-all-tools", policy_dir, None, prepared, full, store, say, reused=reused
        )
        assert record.eval is not None  # run_stage always leaves an evaluation
        out[stage] = record.eval
    return out
