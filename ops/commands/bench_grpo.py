"""`arena bench grpo [--json]`: GRPO training tokens/s against the SFT loop's on the same sequences.

Training only, no rollout sampling: both loops train one fixed batch of synthetic episodes for
`--steps` timed optimizer steps after a warm-up step (see `trainer.bench_grpo`). Issue 31's target
is a GRPO rate of at least 0.8× the SFT loop's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ops.cli import Cli, CliError
from ops.commands.envs import quiet_logs

if TYPE_CHECKING:
    from trainer.bench_grpo import BenchSettings


def _settings(args: argparse.Namespace) -> BenchSettings:
    from pydantic import ValidationError

    from trainer.bench_grpo import BenchSettings

    for flag, value, low in (
        ("--steps", args.steps, 1),
        ("--batch", args.batch, 2),
        ("--seq-len", args.seq_len, 16),
        ("--micro-batch", args.micro_batch, 1),
    ):
        if value < low:
            raise CliError(f"{flag} must be at least {low} (got {value})")
    if args.threads is not None and args.threads < 1:
        raise CliError(f"--threads must be at least 1 (got {args.threads})")
    if args.batch % args.micro_batch:
        raise CliError(f"--micro-batch ({args.micro_batch}) must divide --batch ({args.batch})")
    try:
        return BenchSettings(
            steps=args.steps,
            batch=args.batch,
            seq_len=args.seq_len,
            micro_batch=args.micro_batch,
            gradient_checkpointing=not args.no_gradient_checkpointing,
            lora=args.lora,
            threads=args.threads,
            interleave=not args.sequential,
        )
    except ValidationError as exc:
        problems = [
            f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in exc.errors()
        ]
        raise CliError("; ".join(problems)) from exc


def cmd_bench_grpo(args: argparse.Namespace) -> int:
    """Run the benchmark and print its report."""
    quiet_logs()
    settings = _settings(args)
    from simulate.embedded import EmbeddedModelMissing, ensure_embedded_model
    from trainer.bench_grpo import run_grpo_bench

    try:
        model = Path(args.model) if args.model else ensure_embedded_model()
    except EmbeddedModelMissing as exc:
        raise CliError(str(exc)) from exc
    if not model.is_dir():
        raise CliError(f"{model}: no such model folder")
    if not (model / "config.json").is_file():
        raise CliError(f"{model} is not a model folder (no config.json)")
    print(
        f"[bench grpo] {settings.steps} timed steps (+1 warm-up) of batch {settings.batch} × "
        f"{settings.seq_len} tokens, SFT loop and GRPO…",
        file=sys.stderr,
        flush=True,
    )
    try:
        report = run_grpo_bench(model, settings)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
        return 0
    s = report.settings
    print(
        f"{s['batch']} sequences × {s['seq_len']} tokens ({s['trained_tokens_per_sequence']} trained each), "
        f"{s['steps']} timed steps; gradient checkpointing {'on' if s['gradient_checkpointing'] else 'off'}, "
        f"LoRA {'on' if s['lora'] else 'off'}, bf16 autocast {'on' if s['bf16_autocast'] else 'off'}; {report.device}"
    )
    for name, loop in (("SFT", report.sft), ("GRPO", report.grpo)):
        print(
            f"{name:>5}: {loop.tokens_per_s:8.1f} trained tokens/s ({loop.total_tokens_per_s:8.1f} all tokens/s), "
            f"{loop.seconds:.2f} s for {loop.steps} steps (warm-up {loop.warmup_seconds:.2f} s)"
        )
    verdict = "meets" if report.ratio >= report.target else "below"
    print(
        f"ratio GRPO/SFT: {report.ratio:.2f} ({verdict} the {report.target:g}× target); "
        f"median steps: {report.median_ratio:.2f}"
    )
    return 0


def register(cli: Cli) -> None:
    """Add `arena bench grpo`."""
    p = cli.group("bench", help="performance benchmarks (JSON with --json)").add_parser(
        "grpo", help="GRPO training tokens/s against the SFT loop's on the same fixed sequences"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--steps", type=int, default=3, help="timed optimizer steps per loop, after one warm-up (default 3)"
    )
    p.add_argument(
        "--batch", type=int, default=4, help="sequences per optimizer step, one GRPO group (default 4)"
    )
    p.add_argument(
        "--seq-len", type=int, default=256, help="tokens per sequence, prompt included (default 256)"
    )
    p.add_argument(
        "--micro-batch",
        type=int,
        default=1,
        help="GRPO sequences per forward/backward pass (default 1, as the SFT loop)",
    )
    p.add_argument("--model", help="model folder (default: the embedded model)")
    p.add_argument("--no-gradient-checkpointing", action="store_true", help="train without recomputation")
    p.add_argument("--lora", action="store_true", help="train LoRA adapters (the trainer's LoRA settings)")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    p.add_argument(
        "--sequential",
        action="store_true",
        help="run the SFT loop to the end, then GRPO (one model in memory at a time) instead of alternating steps",
    )
    p.set_defaults(func=cmd_bench_grpo)
