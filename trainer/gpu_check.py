"""One GRPO round through a policy server, measured: what `scripts/gpu-check.sh` prints.

The production path end to end: rollouts sampled by an HTTP policy server (vLLM on a GPU;
`arena serve-model --allow-reload` on CPU) with token ids in and out, the importance-sampling
correction against the server's log-probs, and every update published back to the server (the
LoRA adapter alone, or full weights). The round holds the first `--tasks` tasks of a bundled
environment (multi-turn, with tools: where token chains could break) and one signal task whose
reward always varies (so every step has a gradient). The JSON says whether it trained and what it
cost:

    {"device", "model", "steps", "episodes", "seconds", "chain_breaks", "sampler_logprob_diff",
     "importance_ratio": {"mean", "min", "max"}, "sync": [{"step", "kind", "bytes", "seconds"}],
     "changed_weight_fraction", "peak_memory_gb", "reward_mean"}

`changed_weight_fraction` is the share of the model's weights that differ between the round's
last checkpoint and its start (0 would mean the updates never reached the weights, as pure bf16
at a small learning rate would do). Usage:

    python -m trainer.gpu_check --base-url URL --model DIR [--steps N] [--lora] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from arena.tasks.model import Task

DEFAULT_TASKS = 4


def signal_task(task_id: str = "gpu-check-signal") -> Task:
    """A tool-less task whose reward varies between any model's samples: the share of nine
    mid-frequency letters in a one-sentence answer (scored with shaping).

    A short greeting holds the six most common letters almost always; the mid-frequency ones appear
    in some answers and not in others, so at temperature 1 a group of four almost never scores
    alike. A group of the env's own tasks can score alike and teach nothing; this one keeps a
    gradient in every step, so the check always measures a real update (the trainer's own tests
    train on it for the same reason).
    """
    from arena.tasks.model import AnswerCheck, Task

    return Task(
        id=task_id,
        env="library",
        instruction="Say hello to me in one short sentence.",
        checks=[AnswerCheck(name=f"has {c}", contains=[c]) for c in "cdlmrsuwy"],
    )


def changed_fraction(before: Path, after: Path) -> float:
    """The share of weight elements that differ between two checkpoint folders."""
    import torch
    from safetensors.torch import load_file

    def state(folder: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for file in sorted(folder.glob("*.safetensors")):
            out.update(load_file(str(file)))
        return out

    a, b = state(before), state(after)
    changed = total = 0
    for name, tensor in a.items():
        if name in b:
            changed += int(torch.ne(tensor, b[name].to(tensor.dtype)).sum())
            total += tensor.numel()
    return changed / total if total else 0.0


def peak_memory_gb() -> float:
    """Peak GPU memory of this process where there is a GPU, else its peak resident memory."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


async def check(args: argparse.Namespace) -> dict[str, Any]:
    """Run the round and measure it."""
    import torch

    from arena.env.registry import Registry
    from arena.episode.runner import EpisodeConfig
    from arena.tasks.reward import RewardConfig
    from arena.tasks.toml_io import load_tasks
    from arena.types import SamplingParams
    from trainer.config import LoraConfig, TrainerConfig
    from trainer.grpo import train_round
    from trainer.metrics import StepMetrics
    from trainer.publish import HttpWeightPublisher

    env = Registry().load_all()[args.env]
    own = [t for t in load_tasks(env.path, env.name, tools=env.tools) if not t.needs_judge][: args.tasks]
    tasks = [*own, signal_task()]
    config = TrainerConfig(
        group_size=args.group_size,
        tasks_per_step=len(tasks),
        max_steps=args.steps,
        learning_rate=args.learning_rate,
        lora=LoraConfig(enabled=args.lora),
        keep_last=2,  # the check's retention, from before the trainer's defaults became the daemon's
        weight_sync="adapter" if args.lora else "full",
        system_prompt="compact",
        tool_subset=0,
        # Partial credit per check: the signal task's reward is the share of its letters.
        reward=RewardConfig(shaping_only=True),
        rollout_backend="http",
        rollout_base_url=args.base_url,
        rollout_model=args.served_name,
        episode=EpisodeConfig(
            max_turns=args.max_turns,
            max_tokens_per_turn=args.max_tokens,
            max_total_tokens=8192,
            params=SamplingParams(temperature=1.0, logprobs=True),
        ),
    )
    seen: list[StepMetrics] = []
    publisher = HttpWeightPublisher(args.base_url, args.work / "publish")
    started = time.perf_counter()
    result = await train_round(
        0, tasks, args.model, args.work / "out", config, seen.append, publisher=publisher
    )
    seconds = time.perf_counter() - started
    ratios = [m for m in seen if m.importance_ratio_mean is not None]
    diffs = [m.sampler_logprob_diff for m in seen if m.sampler_logprob_diff is not None]
    return {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "model": str(args.model),
        "lora": args.lora,
        "steps": result.steps,
        "episodes": result.episodes,
        "seconds": round(seconds, 1),
        "reward_mean": result.reward_mean,
        "chain_breaks": result.chain_breaks,
        "sampler_logprob_diff": statistics.fmean(diffs) if diffs else None,
        "importance_ratio": {
            "mean": statistics.fmean(m.importance_ratio_mean for m in ratios) if ratios else None,  # type: ignore[misc]
            "min": min(m.importance_ratio_min for m in ratios) if ratios else None,  # type: ignore[type-var]
            "max": max(m.importance_ratio_max for m in ratios) if ratios else None,  # type: ignore[type-var]
        },
        "sync": [
            {"step": m.step, "kind": m.sync_kind, "bytes": m.sync_bytes, "seconds": m.sync_seconds}
            for m in seen
        ],
        "changed_weight_fraction": changed_fraction(args.model, result.policy_dir),
        "peak_memory_gb": round(peak_memory_gb(), 2),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainer.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True, help="the policy server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", type=Path, required=True, help="the weights the server was started from")
    p.add_argument("--served-name", default="policy", help="the server's model name (default policy)")
    p.add_argument("--work", type=Path, required=True, help="a folder for checkpoints and publications")
    p.add_argument("--env", default="library", help="bundled executable environment (default library)")
    p.add_argument(
        "--tasks", type=int, default=DEFAULT_TASKS, help=f"tasks per step (default {DEFAULT_TASKS})"
    )
    p.add_argument("--group-size", type=int, default=4, help="episodes per task (default 4)")
    p.add_argument("--steps", type=int, default=2, help="GRPO steps (default 2)")
    p.add_argument("--max-turns", type=int, default=3, help="turns per episode (default 3)")
    p.add_argument("--max-tokens", type=int, default=256, help="tokens per turn (default 256)")
    p.add_argument("--learning-rate", type=float, default=1e-5, help="default 1e-5")
    p.add_argument("--lora", action="store_true", help="train LoRA adapters and sync them alone")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for name in ("tasks", "group_size", "steps", "max_turns", "max_tokens"):
        if getattr(args, name) < 1:
            print(f"gpu_check: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if not (args.model / "config.json").is_file():
        print(f"gpu_check: --model {args.model} is not a model folder (no config.json)", file=sys.stderr)
        return 2
    import structlog

    # Progress and logs go to stderr: stdout holds the JSON alone.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    report = anyio.run(check, args)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
