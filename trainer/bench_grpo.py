"""`arena bench grpo`: GRPO training throughput against the SFT loop's, on the very same sequences.

What is measured is *training* — forward, backward, gradient clipping and the optimizer step —
not rollout sampling. Both loops get one fixed batch of token sequences and train on it for
`steps + 1` optimizer steps; the first step of each (allocations, lazy initialisation) is a
warm-up and is not timed.

The sequences are synthetic, fixed-length and episode-shaped (`trainer.bench_sequences`). The
loops are the SFT warm-up's and Arena's GRPO trainer with a fixed `rollout_func`, taking strict
turns step by step (`trainer.bench_loops`). This module holds the settings, the run that ties
them together and the report.

Tokens/s counts trained tokens: the masked-in completion tokens per step (identical for both
loops), times the timed steps, over the timed seconds. `total_tokens` counts every token of the
sequences that went through the model.
"""

from __future__ import annotations

import os
import platform
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainer.bench_loops import _device, _interleaved, _release, run_grpo, run_sft
from trainer.bench_sequences import POLICY_TURN, TOOL_RESULT, fixed_sequences
from trainer.config import LoraConfig, TrainerConfig


class BenchSettings(BaseModel):
    """What one `arena bench grpo` run measures."""

    steps: int = Field(default=3, ge=1, le=99)  # timed optimizer steps per loop (plus one warm-up)
    batch: int = Field(default=4, ge=2, le=256)  # sequences per optimizer step (one GRPO group)
    seq_len: int = Field(default=256, ge=16)  # tokens per sequence, prompt included
    micro_batch: int = Field(default=1, ge=1)  # GRPO sequences per forward/backward pass
    gradient_checkpointing: bool = True
    lora: bool = False
    bf16: bool | None = None  # None: where the hardware computes it natively (`trainer.precision`)
    threads: int | None = Field(default=None, ge=1)  # torch intra-op threads (None: torch's default)
    # Alternate the two loops step by step (both models in memory); False: SFT's steps, then GRPO's.
    interleave: bool = True


class LoopResult(BaseModel):
    """One loop's throughput over its timed steps."""

    tokens_per_s: float  # trained (masked-in) tokens per second
    total_tokens_per_s: float  # every token of the sequences per second
    seconds: float  # timed seconds (the warm-up step excluded)
    steps: int  # timed optimizer steps
    tokens: int  # trained tokens over the timed steps
    total_tokens: int  # every token over the timed steps
    tokens_per_step: int
    step_seconds: list[float]
    # Trained tokens per second of the median timed step: robust to one step slowed by other work
    median_tokens_per_s: float
    warmup_seconds: float
    # GRPO: inside the fixed rollout_func over the timed steps (excluded from `seconds`)
    rollout_seconds: float | None = None
    # GRPO: TRL's batch preparation around the rollout_func over the timed steps (rewards, advantages,
    # padding, old/reference log-probs when configured; included in `seconds`)
    prepare_seconds: float | None = None


class GrpoBenchReport(BaseModel):
    """`arena bench grpo --json`."""

    sft: LoopResult
    grpo: LoopResult
    ratio: float  # grpo.tokens_per_s / sft.tokens_per_s
    median_ratio: float  # the same over the median steps
    target: float = 0.8
    settings: dict[str, Any]
    device: str


def bench_trainer_config(settings: BenchSettings) -> TrainerConfig:
    """The trainer settings both loops run with: the defaults, one group of `batch` per step."""
    if settings.batch % settings.micro_batch:
        raise ValueError(f"micro_batch ({settings.micro_batch}) must divide batch ({settings.batch})")
    config = TrainerConfig(
        group_size=settings.batch,
        tasks_per_step=1,
        max_steps=settings.steps + 1,
        micro_batch_size=settings.micro_batch,
        gradient_checkpointing=settings.gradient_checkpointing,
        bf16=settings.bf16,
        lora=LoraConfig(enabled=settings.lora),
        save_every=settings.steps + 1,
        # The bench's rates and retention, set here since the trainer's defaults became the daemon's.
        learning_rate=1e-5,
        keep_last=2,
    )
    update = {"batch_size": settings.batch, "epochs": float(settings.steps + 1), "learning_rate": 5e-5}
    sft = config.sft.model_copy(update=update)
    return config.model_copy(update={"sft": sft})


def _result(step_seconds: list[float], tokens_per_step: int, total_per_step: int, **extra: Any) -> LoopResult:
    warmup, timed = step_seconds[0], step_seconds[1:]
    seconds = sum(timed)
    tokens, total = tokens_per_step * len(timed), total_per_step * len(timed)
    return LoopResult(
        tokens_per_s=tokens / seconds if seconds > 0 else 0.0,
        total_tokens_per_s=total / seconds if seconds > 0 else 0.0,
        seconds=seconds,
        steps=len(timed),
        tokens=tokens,
        total_tokens=total,
        tokens_per_step=tokens_per_step,
        step_seconds=timed,
        median_tokens_per_s=tokens_per_step / median if (median := statistics.median(timed)) > 0 else 0.0,
        warmup_seconds=warmup,
        **extra,
    )


def describe_device() -> str:
    """The machine the numbers come from."""
    import torch

    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"cpu: {cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def run_grpo_bench(model_dir: Path, settings: BenchSettings) -> GrpoBenchReport:
    """Train the same fixed sequences with the SFT loop and with GRPO; their trained tokens/s."""
    import torch

    model_dir = Path(model_dir).resolve()
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"{model_dir} is not a model folder (no config.json)")
    threads = torch.get_num_threads()
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    try:
        return _run(model_dir, settings)
    finally:
        torch.set_num_threads(threads)


def _run(model_dir: Path, settings: BenchSettings) -> GrpoBenchReport:
    import torch
    from transformers import AutoTokenizer

    from trainer.precision import train_dtype, use_bf16

    config = bench_trainer_config(settings)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    sequences = fixed_sequences(tokenizer, batch=settings.batch, seq_len=settings.seq_len)
    trained = sum(s.trained_tokens for s in sequences)
    total = sum(len(s.input_ids) for s in sequences)
    if settings.interleave:
        sft_seconds, (grpo_seconds, rollout_seconds, prepare_seconds) = _interleaved(
            model_dir, sequences, config
        )
    else:
        sft_seconds = run_sft(model_dir, sequences, config)
        _release()
        grpo_seconds, rollout_seconds, prepare_seconds = run_grpo(model_dir, sequences, config)
    _release()
    sft = _result(sft_seconds, trained, total)
    grpo = _result(
        grpo_seconds,
        trained,
        total,
        rollout_seconds=sum(rollout_seconds[1:]),
        prepare_seconds=sum(prepare_seconds[1:]),
    )
    device = _device()
    return GrpoBenchReport(
        sft=sft,
        grpo=grpo,
        ratio=grpo.tokens_per_s / sft.tokens_per_s if sft.tokens_per_s > 0 else 0.0,
        median_ratio=(
            grpo.median_tokens_per_s / sft.median_tokens_per_s if sft.median_tokens_per_s > 0 else 0.0
        ),
        settings={
            "model": str(model_dir),
            "sequences": "synthetic fixed-length (trainer/bench_sequences.py: fixed_sequences)",
            "steps": settings.steps,
            "warmup_steps": 1,
            "order": "interleaved (SFT step, GRPO step, …)" if settings.interleave else "SFT loop, then GRPO",
            "batch": settings.batch,
            "seq_len": settings.seq_len,
            "prompt_len": len(sequences[0].prompt_ids),
            "trained_tokens_per_sequence": sequences[0].trained_tokens,
            "policy_turn_tokens": POLICY_TURN,
            "tool_result_tokens": TOOL_RESULT,
            "sft_micro_batch": 1,
            "grpo_micro_batch": config.micro_batch,
            "gradient_checkpointing": config.gradient_checkpointing,
            "lora": config.lora.enabled,
            "bf16_autocast": use_bf16(config.bf16, device),
            "weights_dtype": str(train_dtype(device, lora=config.lora.enabled)).removeprefix("torch."),
            "grpo_loss_type": config.loss_type,
            "grpo_beta": config.beta,
            "grpo_iterations_per_batch": config.iterations_per_batch,
            "off_policy_correction": config.off_policy.enabled,
            "torch_threads": torch.get_num_threads(),
        },
        device=describe_device(),
    )
