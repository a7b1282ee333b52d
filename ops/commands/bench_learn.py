"""`arena bench learn [--json] [--quick]`: the learning demonstration on CPU with the embedded model.

Evaluates the base model on multi-step tasks of held-out environments, runs the SFT warm-up and a
GRPO round on tasks of the other environments, evaluates after each stage and prints pass rates
and mean rewards with 95% intervals (per environment and overall), the paired gains, and wall times.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ops.cli import Cli, CliError
from ops.commands.envs import quiet_logs

if TYPE_CHECKING:
    from trainer.config import TrainerConfig


def _pct(i: dict[str, float]) -> str:
    return f"{100 * i['value']:5.1f}% [{100 * i['low']:5.1f}, {100 * i['high']:5.1f}]"


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 1024:.1f} GiB"


# Flags that set a trainer field → the field's path in `TrainerConfig`. Their bounds are the
# config's own: the flags are applied to its data and validated again, so they cannot drift apart.
_TRAINER_FLAGS: dict[str, tuple[str, ...]] = {
    "grpo_steps": ("max_steps",),
    "grpo_lr": ("learning_rate",),
    "grpo_kl_beta": ("beta",),
    "grpo_tasks_per_step": ("tasks_per_step",),
    "grpo_iterations": ("iterations_per_batch",),
    "grpo_temperature": ("episode", "params", "temperature"),
    "sft_epochs": ("sft", "epochs"),
    "sft_lr": ("sft", "learning_rate"),
}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _with_flags(trainer: TrainerConfig, args: argparse.Namespace) -> TrainerConfig:
    """`trainer` with the trainer flags given on the command line; `CliError` names a bad one."""
    from pydantic import ValidationError

    from trainer.config import TrainerConfig

    if args.grpo_temperature is not None and args.grpo_temperature <= 0:
        # Valid for an episode, useless here: greedy samples of a task are all alike, so every
        # group's rewards are equal and GRPO has no signal.
        raise CliError("--grpo-temperature must be above 0 (greedy rollouts give GRPO no signal)")
    data = trainer.model_dump()
    given: dict[tuple[str, ...], str] = {}
    for dest, path in _TRAINER_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        given[path] = _flag(dest)
    try:
        return TrainerConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(str(part) for part in error["loc"])
            name = given.get(loc, ".".join(loc) or "trainer settings")
            problems.append(f"{name}: {error['msg'][0].lower()}{error['msg'][1:]} (got {error['input']!r})")
        raise CliError("; ".join(problems)) from exc


def cmd_bench_learn(args: argparse.Namespace) -> int:
    """Run the benchmark and print its report."""
    quiet_logs()
    from simulate.embedded import EmbeddedModelMissing, ensure_embedded_model
    from trainer.learn_bench import (
        DEFAULT_EVAL_ENVS,
        DEFAULT_EVAL_SYNTH_PER_ENV,
        DEFAULT_TRAIN_SYNTH_PER_ENV,
        QUICK_EVAL_ENVS,
        LearnBenchConfig,
        default_trainer_config,
        run_learn_bench,
    )

    try:
        base = Path(args.model) if args.model else ensure_embedded_model()
    except EmbeddedModelMissing as exc:
        raise CliError(str(exc)) from exc
    if not (base / "config.json").is_file():
        raise CliError(f"{base} is not a model folder (no config.json)")
    trainer = _with_flags(default_trainer_config(args.quick), args)
    if args.synth_tasks is not None and args.synth_tasks < 0:
        raise CliError("--synth-tasks must be 0 or more")
    if args.eval_synth_tasks is not None and args.eval_synth_tasks < 0:
        raise CliError("--eval-synth-tasks must be 0 or more")
    if args.grpo_synth_tasks < 0:
        raise CliError("--grpo-synth-tasks must be 0 or more")
    eval_envs = (
        args.eval_envs.split(",")
        if args.eval_envs
        else list(QUICK_EVAL_ENVS if args.quick else DEFAULT_EVAL_ENVS)
    )
    config = LearnBenchConfig(
        eval_envs=eval_envs,
        eval_samples=args.samples,
        max_train_tasks=args.train_tasks or (16 if args.quick else None),
        synth_per_env=(
            args.synth_tasks
            if args.synth_tasks is not None
            else (0 if args.quick else DEFAULT_TRAIN_SYNTH_PER_ENV)
        ),
        eval_synth_per_env=(
            args.eval_synth_tasks
            if args.eval_synth_tasks is not None
            else (0 if args.quick else DEFAULT_EVAL_SYNTH_PER_ENV)
        ),
        grpo_synth_per_env=args.grpo_synth_tasks,
        eval_temperature=0.0 if args.samples == 1 else 0.7,
        all_tools_eval=not args.no_all_tools_eval,
        trainer=trainer,
    )
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="arena-bench-learn-"))

    def progress(message: str) -> None:
        print(f"[bench learn] {message}", file=sys.stderr, flush=True)

    try:
        report = anyio.run(lambda: run_learn_bench(base, out, config, progress=progress))
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    data = report.model_dump(mode="json")
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"held-out envs: {', '.join(report.eval_envs)} ({report.eval_tasks} tasks); "
        f"trained on {', '.join(report.train_envs)} ({report.train_tasks} tasks, GRPO {report.grpo_tasks})"
    )
    for stage in data["stages"]:
        overall = stage["eval"]["overall"]
        print(
            f"{stage['stage']:>5}: pass {_pct(overall['pass_rate'])}  reward {_pct(overall['reward'])}  "
            f"train {stage['train_seconds']:.0f}s, eval {stage['eval']['seconds']:.0f}s; "
            f"peak memory train {_mb(stage.get('train_peak_rss_mb'))}, eval {_mb(stage['eval'].get('peak_rss_mb'))}"
        )
    grpo = next((s for s in data["stages"] if s["stage"] == "grpo"), None)
    if grpo is not None and grpo.get("kl_per_token") is not None:
        print(
            f" grpo: KL(sampler ‖ trainer) per token {grpo['kl_per_token']:.2e} (step max "
            f"{grpo['kl_per_token_max']:.2e}), largest per-token ratio {grpo['ratio_peak']:.3g}"
            + (
                f", KL to the reference {grpo['reference_kl']:.2e}"
                if grpo.get("reference_kl") is not None
                else ""
            )
            + f", {grpo['forced_tokens']} grammar-forced tokens not trained"
        )
    for stage_name, sources in data["per_source_pass_rate"].items():
        parts = ", ".join(f"{source} {_pct(rate)}" for source, rate in sources.items())
        print(f"{stage_name:>5}: pass by task source: {parts}")
    for key in ("sft_minus_base", "grpo_minus_base", "grpo_minus_sft"):
        print(f"{key}: {_pct(data[key])}")
    if report.tool_subset is not None:
        print(
            f"tool view: each task shows its reference tools + {report.tool_subset} distractors (tool subset)"
        )
    for stage_name, rate in data["pass_rate_all_tools"].items():
        print(f"{stage_name:>5}: pass with every tool {_pct(rate)}")
    if data["grpo_minus_base_all_tools"] is not None:
        print(f"grpo_minus_base with every tool: {_pct(data['grpo_minus_base_all_tools'])}")
    reused = (
        f" (with work reused from an earlier run: {report.total_seconds / 60:.1f} min)"
        if report.reused_seconds
        else ""
    )
    print(f"wall time {report.wall_seconds / 60:.1f} min{reused}; targets: {report.targets}")
    for note in report.notes:
        print(f"note: {note}")
    return 0


def register(cli: Cli) -> None:
    """Add `arena bench learn`."""
    p = cli.group("bench", help="performance benchmarks (JSON with --json)").add_parser(
        "learn", help="learning demo: base vs SFT vs GRPO on held-out environments (CPU, embedded model)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--quick", action="store_true", help="a short run (fewer steps, two held-out envs)")
    p.add_argument("--model", help="base model folder (default: the embedded model)")
    p.add_argument(
        "--out",
        help="folder for checkpoints and stage records; a rerun into it resumes (default: a new temporary folder)",
    )
    p.add_argument("--eval-envs", help="comma-separated held-out environments")
    p.add_argument("--grpo-steps", type=int, help="GRPO optimizer steps (default 9; 2 with --quick)")
    p.add_argument("--sft-epochs", type=float, help="SFT warm-up epochs")
    p.add_argument("--sft-lr", type=float, help="SFT warm-up learning rate (default 1e-4)")
    p.add_argument("--grpo-lr", type=float, help="GRPO learning rate (default 1e-5)")
    p.add_argument(
        "--grpo-kl-beta",
        type=float,
        help="KL coefficient against the warm-up policy (default 0: no reference model)",
    )
    p.add_argument(
        "--grpo-tasks-per-step",
        type=int,
        help="GRPO groups (tasks) per optimizer step (default 2; 4 samples each)",
    )
    p.add_argument(
        "--grpo-iterations",
        type=int,
        help="GRPO optimizer steps on each batch of rollouts (default 1; above 1 the clip bounds the reuse)",
    )
    p.add_argument(
        "--grpo-temperature", type=float, help="sampling temperature of the GRPO rollouts (default 1.0)"
    )
    p.add_argument("--train-tasks", type=int, help="use at most this many training tasks")
    p.add_argument(
        "--synth-tasks",
        type=int,
        help="graph-synthesized training tasks per training environment (default 16; 0 with --quick)",
    )
    p.add_argument(
        "--eval-synth-tasks",
        type=int,
        help="graph-synthesized evaluation tasks per held-out environment, reported apart "
        "(default 6; 0 with --quick)",
    )
    p.add_argument(
        "--grpo-synth-tasks",
        type=int,
        default=0,
        help="fresh graph-synthesized tasks per training environment that GRPO trains on instead of "
        "the warm-up's tasks (default 0: GRPO trains on the warm-up's tasks)",
    )
    p.add_argument(
        "--samples", type=int, default=1, help="evaluation episodes per task (>1 samples at T=0.7)"
    )
    p.add_argument(
        "--no-all-tools-eval",
        action="store_true",
        help="skip evaluating every stage with every tool shown (done by default when a tool subset is used)",
    )
    p.set_defaults(func=cmd_bench_learn)
