"""`arena train TASK... --out DIR`: one manual training round (SFT warm-up, then GRPO) outside the daemon.

TASK is an environment name (all its autonomous tasks with a reference) or `ENV/ID`. The policy
is a model folder or `embedded`; the warm-up runs for a fresh policy unless `--no-sft`.
Prints the `TrainResult` of each stage (JSON with `--json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from ops.cli import Cli, CliError
from ops.commands.envs import env_path_of, quiet_logs


def _tasks(specs: list[str], env_path: list[Path]) -> tuple[list[Any], dict[str, Any]]:
    from arena.env.errors import EnvLoadError
    from arena.env.loader import load_environment
    from arena.env.registry import discover
    from arena.tasks.toml_io import load_tasks

    found = discover(env_path)
    envs: dict[str, Any] = {}
    tasks: list[Any] = []
    for spec in specs:
        name, _, task_id = spec.partition("/")
        if name not in found:
            raise CliError(f"unknown environment {name!r} (known: {', '.join(sorted(found)) or 'none'})")
        try:
            env = envs.get(name) or load_environment(found[name])
            loaded = load_tasks(env.path, env.name, tools=env.tools) if env.kind == "executable" else []
        except EnvLoadError as exc:
            raise CliError(
                f"{name} does not load ({len(exc.problems)} problems): arena envs check {name}"
            ) from exc
        envs[name] = env
        picked = [
            t for t in loaded if (t.id == task_id if task_id else t.mode == "autonomous" and t.reference)
        ]
        if not picked:
            raise CliError(f"no trainable task matches {spec!r}")
        tasks.extend(picked)
    return tasks, envs


def cmd_train(args: argparse.Namespace) -> int:
    """Run SFT (if needed) and one GRPO round, printing the results."""
    quiet_logs()
    from simulate.embedded import EmbeddedModelMissing, ensure_embedded_model
    from trainer.config import SftConfig, TrainerConfig
    from trainer.grpo import train_round
    from trainer.sft import needs_warmup, sft_warmup

    if args.steps < 1 or args.group_size < 2:
        raise CliError("--steps must be at least 1 and --group-size at least 2")
    try:
        policy = ensure_embedded_model() if args.policy == "embedded" else Path(args.policy)
    except EmbeddedModelMissing as exc:
        raise CliError(str(exc)) from exc
    if not (policy / "config.json").is_file():
        raise CliError(f"{policy} is not a model folder (no config.json)")
    tasks, envs = _tasks(args.tasks, env_path_of(args))
    config = TrainerConfig(
        max_steps=args.steps,
        group_size=args.group_size,
        system_prompt=args.prompt,
        tool_subset=args.tool_subset,
        # This command's rates and retention, set here since the trainer's defaults became the daemon's.
        learning_rate=1e-5,
        keep_last=2,
        sft=SftConfig(epochs=3.0, learning_rate=5e-5),
    )
    out = Path(args.out)

    async def run() -> list[Any]:
        results = []
        start = policy
        if not args.no_sft and needs_warmup(policy, config):
            sft = await sft_warmup(args.round, tasks, policy, out / "sft", config, envs=envs)
            results.append(sft)
            start = sft.policy_dir
        results.append(await train_round(args.round, tasks, start, out / "grpo", config, envs=envs))
        return results

    try:
        results = anyio.run(run)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    for result in results:
        if args.json:
            print(json.dumps(result.model_dump(mode="json", exclude={"metrics"})))
        else:
            print(
                f"{result.phase}: {result.steps} steps in {result.seconds:.0f}s -> {result.policy_dir}"
                + (f" (reward {result.reward_mean:.2f})" if result.reward_mean is not None else "")
            )
    print(f"policy: {results[-1].policy_dir}", file=sys.stderr)
    return 0


def register(cli: Cli) -> None:
    """Add `arena train`."""
    p = cli.command("train", help="one manual training round (SFT warm-up + GRPO) on bundled tasks")
    p.add_argument(
        "--env-path",
        action="append",
        default=[],
        metavar="DIR",
        help="extra environment folders (like ARENA_ENV_PATH; repeatable)",
    )
    p.add_argument("tasks", nargs="+", metavar="TASK", help="ENV (its tasks) or ENV/ID")
    p.add_argument("--out", required=True, help="output folder (checkpoints; reruns resume)")
    p.add_argument("--policy", default="embedded", help="model folder to start from (default: embedded)")
    p.add_argument("--steps", type=int, default=10, help="GRPO optimizer steps (default 10)")
    p.add_argument("--group-size", type=int, default=4, help="samples per task (default 4)")
    p.add_argument("--round", type=int, default=0, help="round id recorded in the lineage")
    p.add_argument("--prompt", choices=["full", "compact"], default="full", help="system prompt style")
    p.add_argument("--tool-subset", type=int, default=None, help="show reference tools + N distractors")
    p.add_argument("--no-sft", action="store_true", help="skip the warm-up even for a fresh policy")
    p.add_argument("--json", action="store_true", help="one JSON line per stage")
    p.set_defaults(func=cmd_train)
