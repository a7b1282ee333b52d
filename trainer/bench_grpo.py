"""`arena bench grpo`: GRPO training throughput against the SFT loop's, on the very same sequences.

What is measured is *training* — forward, backward, gradient clipping and the optimizer step —
not rollout sampling. Both loops get one fixed batch of token sequences and train on it for
`steps + 1` optimizer steps; the first step of each (allocations, lazy initialisation) is a
warm-up and is not timed.

The sequences are synthetic and fixed-length (`fixed_sequences`): `seq_len` token ids drawn with a
fixed seed from the tokenizer's ordinary vocabulary (special tokens left out), shaped like an
Arena episode: the first quarter is the prompt (system prompt, tools, task), the rest the
completion, in which policy turns (`POLICY_TURN` tokens ending in `<|im_end|>`, trained) alternate
with tool results (`TOOL_RESULT` tokens, context only); the completion ends with the end-of-turn
token. Every row has the same shape (no padding). Token identities do not change the cost of a
step; their count and the share the loss trains do.

- SFT: the warm-up's own loop (`trainer.sft._train_sync`, AdamW, assistant-only loss through
  `assistant_token_loss`) on the sequences as `SftExample`s — labels on the policy-turn tokens.
  It trains one sequence per forward/backward pass (that loop has no micro-batching).
- GRPO: Arena's `PolicyTokenGRPOTrainer` (TRL's `GRPOTrainer`, built the way `trainer.grpo`
  builds it, with `grpo_args`) running its real `train()` loop, with a `rollout_func` that returns
  the same sequences every step instead of sampling: `prompt_ids`, `completion_ids`, `env_mask`
  (1 on the policy turns), the sampler's log-probs (scored once before timing, so the
  importance-sampling correction runs as it does in a round) and fixed rewards that alternate 1/0
  inside the group, so every advantage is non-zero. A step's time is TRL's whole optimizer step
  (`on_step_begin` → `on_step_end`: its "generation" bookkeeping, advantages, the loss
  micro-batches, clipping, the optimizer) minus the time inside the `rollout_func`, which is
  reported apart (it only hands back prepared lists).

The two loops run in two threads that take strict turns (`Turns`): SFT step, GRPO step, SFT
step, … — only one computes at a time, and the hand-over happens outside the timed window. On a
shared machine whose load drifts, both loops then see the same drift (`interleave=False` runs the
SFT loop to the end first, then GRPO, holding one model at a time).

Tokens/s counts trained tokens: the masked-in completion tokens per step (identical for both
loops), times the timed steps, over the timed seconds. `total_tokens` counts every token of the
sequences that went through the model.
"""

from __future__ import annotations

import gc
import os
import platform
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trainer.config import LoraConfig, TrainerConfig

POLICY_TURN = 32  # trained tokens per policy turn, the end-of-turn token included
TOOL_RESULT = 64  # context tokens per tool result (template glue included)
SEED = 0
BENCH_TASK = "bench/fixed-sequences"


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


@dataclass(frozen=True)
class FixedSequence:
    """One training sequence: prompt, completion and the loss mask over the completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    mask: list[int]  # 1 on the policy's tokens (trained), 0 on tool results

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    @property
    def trained_tokens(self) -> int:
        return sum(self.mask)


def _end_of_turn(tokenizer: Any) -> int:
    ids = tokenizer("<|im_end|>", add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        return int(ids[0])
    return int(tokenizer.eos_token_id)


def fixed_sequences(tokenizer: Any, *, batch: int, seq_len: int, seed: int = SEED) -> list[FixedSequence]:
    """`batch` synthetic episodes of `seq_len` tokens (see the module docstring)."""
    if seq_len < 16:
        raise ValueError(f"seq_len must be at least 16 tokens (got {seq_len})")
    special = set(tokenizer.all_special_ids)
    vocab = [i for i in range(len(tokenizer)) if i not in special]
    end = _end_of_turn(tokenizer)
    prompt_len = seq_len // 4
    width = seq_len - prompt_len
    mask: list[int] = []
    while len(mask) < width:
        mask += [1] * POLICY_TURN + [0] * TOOL_RESULT
    mask = mask[:width]
    rng = random.Random(seed)
    out = []
    for _ in range(batch):
        prompt = [rng.choice(vocab) for _ in range(prompt_len)]
        completion = [rng.choice(vocab) for _ in range(width)]
        for t in range(width):  # each policy turn (and the completion) ends with the end-of-turn token
            last_of_turn = mask[t] == 1 and (t + 1 == width or mask[t + 1] == 0)
            if last_of_turn or t + 1 == width:
                completion[t] = end
        out.append(FixedSequence(prompt, completion, list(mask)))
    return out


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
    )
    sft = config.sft.model_copy(update={"batch_size": settings.batch, "epochs": float(settings.steps + 1)})
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


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _release() -> None:
    from trainer.memory import release_memory

    gc.collect()
    release_memory("bench grpo")


class Aborted(RuntimeError):
    """The other loop failed: this one stops instead of waiting for its turn forever."""


class Turns:
    """Strict alternation of the two loops: one trains a step while the other waits at a step boundary.

    On a machine shared with other work the load drifts over minutes; alternating SFT step, GRPO
    step, SFT step, … exposes both loops to the same drift, where running one loop after the other
    would credit one of them with a quieter minute.
    """

    def __init__(self, first: str) -> None:
        self._cond = threading.Condition()
        self._turn = first
        self._aborted = False

    def wait(self, me: str) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._turn == me or self._aborted)
            if self._aborted:
                raise Aborted("the other loop of the bench failed")

    def give(self, to: str) -> None:
        with self._cond:
            self._turn = to
            self._cond.notify_all()

    def abort(self) -> None:
        with self._cond:
            self._aborted = True
            self._cond.notify_all()


def run_sft(
    model_dir: Path, sequences: list[FixedSequence], config: TrainerConfig, turns: Turns | None = None
) -> list[float]:
    """Seconds of each optimizer step of the SFT warm-up loop on `sequences` (warm-up step first).

    With `turns`, the loop hands over to GRPO after each step and waits for its next turn (outside
    the timed step).
    """
    from trainer.checkpoints import load_policy
    from trainer.precision import train_dtype
    from trainer.sft import IGNORE, SftExample, _train_sync

    device = _device()
    model, tokenizer = load_policy(
        model_dir, device=device, dtype=train_dtype(device, lora=config.lora.enabled)
    )
    if config.lora.enabled:  # as `sft_warmup` does
        from peft import get_peft_model

        model = get_peft_model(model, config.lora.peft_config())
        if config.gradient_checkpointing:
            model.enable_input_require_grads()
    examples = [
        SftExample(
            task=BENCH_TASK,
            input_ids=s.input_ids,
            labels=[IGNORE] * len(s.prompt_ids)
            + [tok if m else IGNORE for tok, m in zip(s.completion_ids, s.mask, strict=True)],
        )
        for s in sequences
    ]
    seconds: list[float] = []

    def on_step(metrics: Any) -> None:
        seconds.append(float(metrics.seconds or 0.0))
        if turns is not None:
            turns.give("grpo")
            if len(seconds) < config.max_steps:
                turns.wait("sft")

    _train_sync(model, tokenizer, examples, config, 0, on_step, None)
    if len(seconds) != config.max_steps:
        raise RuntimeError(f"the SFT loop ran {len(seconds)} steps, expected {config.max_steps}")
    return seconds


class FixedRollouts:
    """A `rollout_func` that returns the same sequences every step (no sampling)."""

    def __init__(self, sequences: list[FixedSequence], sampler_logps: list[list[float]]) -> None:
        self.sequences = sequences
        self.sampler_logps = sampler_logps
        self.seconds: list[float] = []
        # TRL's whole batch preparation around each call (rewards, advantages, padding, metrics)
        self.prepare_seconds: list[float] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        started = time.perf_counter()
        if len(prompts) != len(self.sequences):
            raise ValueError(
                f"asked for {len(prompts)} rollouts, the bench has {len(self.sequences)} sequences"
            )
        out = {
            "prompt_ids": [list(s.prompt_ids) for s in self.sequences],
            "completion_ids": [list(s.completion_ids) for s in self.sequences],
            "logprobs": [list(lp) for lp in self.sampler_logps],
            "env_mask": [list(s.mask) for s in self.sequences],
            # Alternating rewards inside the group: every advantage is non-zero.
            "reward": [float(i % 2 == 0) for i in range(len(self.sequences))],
        }
        self.seconds.append(time.perf_counter() - started)
        return out


def _sampler_logps(model: Any, sequences: list[FixedSequence], temperature: float) -> list[list[float]]:
    """The log-probs a sampler would report for the policy turns (0.0 elsewhere, as Arena's bridge does)."""
    import torch

    from trainer.policy_logps import policy_token_logps

    device = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for s in sequences:
            ids = torch.tensor([s.input_ids], device=device)
            mask = torch.tensor([s.mask], device=device)
            logps, _ = policy_token_logps(model, ids, torch.ones_like(ids), mask, temperature=temperature)
            out.append([float(v) for v in logps[0].tolist()])
    return out


def run_grpo(
    model_dir: Path, sequences: list[FixedSequence], config: TrainerConfig, turns: Turns | None = None
) -> tuple[list[float], list[float], list[float]]:
    """Seconds of each GRPO optimizer step on `sequences` (warm-up first), inside the rollout_func, and
    in TRL's batch preparation around it (included in the step).

    With `turns`, the trainer hands over to SFT after each step and waits for its next turn (outside
    the timed step).
    """
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from trainer.grpo import grpo_args
    from trainer.grpo_model import load_start
    from trainer.policy_logps import policy_token_trainer_class
    from trainer.rollout import reward_from_rollout, task_prompt

    model, tokenizer = load_start(model_dir, model_dir, config, _device())
    rollouts = FixedRollouts(
        sequences, _sampler_logps(model, sequences, config.episode.params.temperature or 1.0)
    )
    started: list[float] = []
    ended: list[float] = []

    class Timer(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            started.append(time.perf_counter())

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            ended.append(time.perf_counter())
            if turns is not None:
                turns.give("sft")
                if len(ended) < config.max_steps:
                    turns.wait("grpo")

    with tempfile.TemporaryDirectory(prefix="arena-bench-grpo-") as tmp:
        trainer = policy_token_trainer_class()(
            model=model,
            reward_funcs=[reward_from_rollout],
            args=grpo_args(config, Path(tmp), max_steps=config.max_steps, seed=config.seed),
            train_dataset=Dataset.from_list([{"prompt": task_prompt(BENCH_TASK)}]),
            processing_class=tokenizer,
            callbacks=[Timer()],
            peft_config=config.lora.peft_config(),
            rollout_func=rollouts,
        )
        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        prepare = trainer._generate_and_score_completions

        def timed_prepare(inputs: Any) -> Any:
            begun = time.perf_counter()
            try:
                return prepare(inputs)
            finally:
                rollouts.prepare_seconds.append(time.perf_counter() - begun)

        trainer._generate_and_score_completions = timed_prepare
        trainer.train()
    if len(ended) != config.max_steps or len(rollouts.seconds) != config.max_steps:
        raise RuntimeError(
            f"the GRPO loop ran {len(ended)} steps and {len(rollouts.seconds)} rollouts, expected {config.max_steps}"
        )
    seconds = [e - s - r for s, e, r in zip(started, ended, rollouts.seconds, strict=True)]
    prepare = [p - r for p, r in zip(rollouts.prepare_seconds, rollouts.seconds, strict=True)]
    return seconds, rollouts.seconds, prepare


def _interleaved(
    model_dir: Path, sequences: list[FixedSequence], config: TrainerConfig
) -> tuple[list[float], tuple[list[float], list[float], list[float]]]:
    """Both loops in their own thread, alternating optimizer steps (SFT first)."""
    turns = Turns("sft")
    results: dict[str, Any] = {}
    errors: list[BaseException] = []

    def body(name: str, run: Any) -> None:
        try:
            turns.wait(name)  # loading and setting up are done in turn too
            results[name] = run(model_dir, sequences, config, turns)
        except Aborted:
            pass
        except BaseException as exc:  # the other loop must not wait for a turn that never comes
            errors.append(exc)
            turns.abort()

    threads = [
        threading.Thread(target=body, args=("sft", run_sft), name="bench-sft"),
        threading.Thread(target=body, args=("grpo", run_grpo), name="bench-grpo"),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results["sft"], results["grpo"]


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
            "sequences": "synthetic fixed-length (trainer/bench_grpo.py: fixed_sequences)",
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
