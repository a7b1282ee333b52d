"""The two timed training loops of `arena bench grpo`, SFT and GRPO, and their strict alternation.

- SFT: the warm-up's own loop (`trainer.sft._train_sync`, AdamW, assistant-only loss through
  `assistant_token_loss`) on the sequences as `SftExample`s — labels on the policy-turn tokens.
  It trains one sequence per forward/backward pass (that loop has no micro-batching).
- GRPO: Arena's `PolicyTokenGRPOTrainer` (TRL's `GRPOTrainer`, built the way `trainer.grpo`
  builds it, with `grpo_args`) running its real `train()` loop, with a `rollout_func` that returns
  the same sequences every step instead of sampling (`trainer.bench_sequences.FixedRollouts`):
  `prompt_ids`, `completion_ids`, `env_mask` (1 on the policy turns), the sampler's log-probs
  (scored once before timing, so the importance-sampling correction runs as it does in a round)
  and fixed rewards that alternate 1/0 inside the group, so every advantage is non-zero. A step's
  time is TRL's whole optimizer step (`on_step_begin` → `on_step_end`: its "generation"
  bookkeeping, advantages, the loss micro-batches, clipping, the optimizer) minus the time inside
  the `rollout_func`, which is reported apart (it only hands back prepared lists).

The two loops run in two threads that take strict turns (`Turns`): SFT step, GRPO step, SFT
step, … — only one computes at a time, and the hand-over happens outside the timed window. On a
shared machine whose load drifts, both loops then see the same drift (`interleave=False` runs the
SFT loop to the end first, then GRPO, holding one model at a time).
"""

from __future__ import annotations

import gc
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from trainer.bench_sequences import FixedRollouts, FixedSequence, _sampler_logps
from trainer.config import TrainerConfig

BENCH_TASK = "bench/fixed-sequences"


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
