"""The fixed inputs of `arena bench grpo`: synthetic sequences, and a `rollout_func` returning them.

The sequences are synthetic and fixed-length (`fixed_sequences`): `seq_len` token ids drawn with a
fixed seed from the tokenizer's ordinary vocabulary (special tokens left out), shaped like an
Arena episode: the first quarter is the prompt (system prompt, tools, task), the rest the
completion, in which policy turns (`POLICY_TURN` tokens ending in `<|im_end|>`, trained) alternate
with tool results (`TOOL_RESULT` tokens, context only); the completion ends with the end-of-turn
token. Every row has the same shape (no padding). Token identities do not change the cost of a
step; their count and the share the loss trains do.

GRPO gets them through `FixedRollouts`, a `rollout_func` that hands back the same sequences every
step instead of sampling, with the sampler's log-probs (`_sampler_logps`, scored once before
timing) and fixed rewards.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

POLICY_TURN = 32  # trained tokens per policy turn, the end-of-turn token included
TOOL_RESULT = 64  # context tokens per tool result (template glue included)
SEED = 0


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
