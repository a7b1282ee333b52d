"""`arena bench learn [--json] [--rounds N] [--config FILE] [--out DIR] [--seed S]`: does the loop learn?

Runs the daemon's own rounds (`ops.learn_run`: the phases `make run` runs, in a folder of its own)
and prints the yardstick round by round with the change from round 1 and from the previous round,
the warm-up's and GRPO's shares within each round (paired 95% intervals) and each phase's time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import anyio

from ops.cli import Cli, CliError


def cmd_bench_learn(args: argparse.Namespace) -> int:
    """Run the rounds (or the missing ones, in an existing `--out`), then report them."""
    from ops.config import ConfigError
    from ops.learn_run import DEFAULT_CONFIG, bench_config, read_report, render, run_rounds
    from ops.logging import configure_logging

    if args.rounds < 1:
        raise CliError(f"--rounds must be at least 1, got {args.rounds}")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="arena-learn-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        config = bench_config(args.config, out, args.seed)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    # The rounds log to stderr (JSON lines with --json), so stdout holds the report alone.
    configure_logging(config.logging.level, "json" if args.json else "console", stream=sys.stderr)
    name = str(args.config or DEFAULT_CONFIG)

    async def main() -> int:
        code = await run_rounds(config, args.rounds)
        report = await read_report(config, name)
        if args.json:
            print(json.dumps(report.model_dump(mode="json"), indent=2))
        else:
            print("\n".join(render(report)))
        return code

    return anyio.run(main)


def register(cli: Cli) -> None:
    """Add `arena bench learn`."""
    p = cli.group("bench", help="performance benchmarks (JSON with --json)").add_parser(
        "learn",
        help="the daemon's own rounds in a scratch folder: the yardstick by round, warm-up and GRPO shares",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--rounds", type=int, default=3, help="rounds to run (default 3)")
    p.add_argument(
        "--config",
        type=Path,
        help="the daemon's configuration (default config/cpu-demo.toml, what make run starts)",
    )
    p.add_argument(
        "--out",
        help="folder for the data directory and store; a rerun into it resumes (default: a new temp folder)",
    )
    p.add_argument("--seed", type=int, default=0, help="the daemon's seed (default 0)")
    p.set_defaults(func=cmd_bench_learn)
