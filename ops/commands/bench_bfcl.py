"""`arena bench bfcl [--json]`: BFCL multi-turn, played and scored by BFCL's rules.

Three sources of trajectories:

- the policy (default): `[models.policy]` of the configuration (local or HTTP; `--model` names
  another local folder, `embedded`, or the served model name) plays each entry greedily;
- `--gold`: the ground truth replayed through Arena's own episodes (a scripted policy): every
  entry must pass, which checks the import, the episode driver and the scorer together;
- `--score FILE`: trajectories in BFCL's decoded form from another harness (JSON lines or a JSON
  list of `{"id": ..., "result": [[["call(...)", ...], ...], ...]}`), only scored.

Entries: `--categories` (default all four), `--limit N` per category (a fixed sample by `--seed`),
`--entries ID,...`. The backend's code runs in-process, in the sandbox with `ARENA_SANDBOX=all`.
Output: accuracy per category and overall with Wilson 95% intervals, error types, the time per
entry and every entry's verdict.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import anyio

from arena.public.bfcl.dist import CATEGORIES
from ops.cli import Cli, CliError
from ops.commands.admin import interval_text
from ops.commands.envs import daemon_config, quiet_logs


def _entries(args: argparse.Namespace, bench: Any) -> list[Any]:
    from arena.public.bfcl.run import sample

    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be at least 1 (entries per category)")
    try:
        entries = sample(
            bench, [c.strip() for c in args.categories.split(",") if c.strip()], args.limit, args.seed
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.entries:
        wanted = [e.strip() for e in args.entries.split(",") if e.strip()]
        known = {e.id for es in bench.entries.values() for e in es}
        unknown = [e for e in wanted if e not in known]
        if unknown:
            raise CliError(f"--entries: no BFCL entries {unknown}")
        entries = [bench.entry(e) for e in wanted]
    if not entries:
        raise CliError("no entries to run (check --categories and --limit)")
    return entries


async def _policy(args: argparse.Namespace, config: Any) -> Any:
    from ops.models import ModelHub

    if args.model:
        config = config.model_copy(
            update={
                "models": config.models.model_copy(
                    update={"policy": config.models.policy.model_copy(update={"model": args.model})}
                )
            }
        )
    try:
        return await ModelHub(config).policy()
    except Exception as exc:  # a model that cannot be built is the user's setting to fix
        raise CliError(f"cannot load the policy model: {type(exc).__name__}: {exc}") from None


async def _results(
    args: argparse.Namespace, config: Any, bench: Any, entries: list[Any], pool: Any
) -> list[Any]:
    from arena.env.object_runtime import ObjectRunner
    from arena.public.bfcl.episode import EpisodeLimits
    from arena.public.bfcl.gold import GoldReplayPolicy
    from arena.public.bfcl.run import play, read_result_file, score_file

    runner = ObjectRunner(bench.backend(), str(bench.backend_dir), pool)
    irrelevance = not args.skip_irrelevance_check
    if args.score:
        try:
            trajectories = read_result_file(Path(args.score))
        except (OSError, ValueError) as exc:
            raise CliError(str(exc)) from None
        if not args.limit and not args.entries:
            entries = [e for e in entries if e.id in trajectories]
        return await score_file(bench, trajectories, entries, runner, irrelevance=irrelevance)
    if min(args.max_steps, args.max_tokens, args.concurrency) < 1:
        raise CliError("--max-steps, --max-tokens and --concurrency must be at least 1")
    limits = EpisodeLimits(max_steps_per_turn=args.max_steps, max_tokens_per_step=args.max_tokens)
    policy = None if args.gold else await _policy(args, config)
    out: list[Any] = [None] * len(entries)
    limiter = anyio.CapacityLimiter(max(1, args.concurrency))

    async def one(i: int) -> None:
        async with limiter:
            model = GoldReplayPolicy(entries[i]) if args.gold else policy
            out[i] = await play(model, bench, entries[i], runner, limits, irrelevance=irrelevance)

    async with anyio.create_task_group() as tg:
        for i in range(len(entries)):
            tg.start_soon(one, i)
    return out


async def _run(args: argparse.Namespace, config: Any, bench: Any, entries: list[Any]) -> list[Any]:
    from arena.sandbox import SandboxPool

    if config.sandbox.mode != "all":
        return await _results(args, config, bench, entries, None)
    async with SandboxPool(config.sandbox.limits(), workers=config.sandbox.workers) as pool:
        return await _results(args, config, bench, entries, pool)


def report(bench: Any, results: list[Any], mode: str, seconds: float, sandboxed: bool) -> dict[str, Any]:
    """The JSON document: figures per category and overall, errors, timing, every verdict."""
    from ops.phases.public_scores import ScoredEntry, summarize

    rows = [ScoredEntry(**r.verdict.model_dump(), seconds=r.run.seconds if r.run else None) for r in results]
    summary = summarize(
        rows, benchmark="bfcl", version=bench.version, stage="bench", policy=mode, sandboxed=sandboxed
    )
    return {
        "benchmark": "bfcl",
        "version": bench.version,
        "mode": mode,
        "entries": len(results),
        "categories": {c: s.model_dump() for c, s in summary.categories.items()},
        "overall": summary.overall.model_dump() if summary.overall else None,
        "errors": summary.errors,
        "seconds": round(seconds, 3),
        "seconds_per_entry": round(seconds / len(results), 3) if results else None,
        "sandboxed": sandboxed,
        "verdicts": [
            {
                **r.verdict.model_dump(),
                **(
                    {"finish": r.run.finish, "seconds": round(r.run.seconds, 3), "calls": r.run.calls}
                    if r.run
                    else {}
                ),
            }
            for r in results
        ],
    }


def cmd_bench_bfcl(args: argparse.Namespace) -> int:
    """`arena bench bfcl`."""
    from arena.public.bfcl.model import SUBDIR, load_benchmark

    quiet_logs()
    if args.gold and args.score:
        raise CliError("--gold and --score are two sources of trajectories: give one")
    config = daemon_config(args)
    folder = Path(args.dir) if args.dir else config.data.dir / SUBDIR
    try:
        bench = load_benchmark(folder)
    except (FileNotFoundError, ValueError) as exc:
        raise CliError(str(exc)) from None
    entries = _entries(args, bench)
    started = time.perf_counter()
    results = anyio.run(_run, args, config, bench, entries)
    policy = config.models.policy
    mode = (
        "gold"
        if args.gold
        else f"score:{args.score}"
        if args.score
        else f"policy:{policy.backend}:{args.model or policy.model}"
    )
    doc = report(bench, results, mode, time.perf_counter() - started, config.sandbox.mode == "all")
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"BFCL multi-turn ({doc['version']}), {mode}: {doc['entries']} entries, {doc['seconds_per_entry']} s per entry"
    )
    for cat, s in doc["categories"].items():
        print(f"  {cat:<14} {interval_text(s)}")
    print(f"  {'overall':<14} {interval_text(doc['overall'])}")
    if doc["errors"]:
        print("  errors: " + ", ".join(f"{k} {v}" for k, v in sorted(doc["errors"].items())))
    return 0


def register(cli: Cli) -> None:
    """Add `arena bench bfcl`."""
    p = cli.group("bench").add_parser(
        "bfcl", help="BFCL multi-turn: accuracy per category by BFCL's rules (policy, --gold or --score FILE)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--config", type=Path, help="TOML configuration ([models.policy], data dir, sandbox)")
    p.add_argument("--dir", metavar="DIR", help="the imported benchmark (default DATA_DIR/public/bfcl)")
    p.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated (default: all four)")
    p.add_argument("--limit", type=int, metavar="N", help="entries per category (a fixed sample by --seed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the --limit sample (default 0)")
    p.add_argument("--entries", metavar="ID,...", help="these entries only (BFCL ids)")
    p.add_argument("--gold", action="store_true", help="replay the ground truth through Arena's episodes")
    p.add_argument("--score", metavar="FILE", help="score decoded trajectories from another harness")
    p.add_argument(
        "--model", help="policy model instead of [models.policy].model ('embedded', a folder, a served name)"
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=20,
        help="steps with calls per turn before the entry fails (BFCL: 20)",
    )
    p.add_argument("--max-tokens", type=int, default=256, help="tokens per policy step (default 256)")
    p.add_argument("--concurrency", type=int, default=1, help="entries played at once (default 1)")
    p.add_argument(
        "--skip-irrelevance-check",
        action="store_true",
        help="do not fail calls in turns that expect none (as bfcl-eval 2026.3.23's own runner scores)",
    )
    p.set_defaults(func=cmd_bench_bfcl)
