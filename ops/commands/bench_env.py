"""`arena bench env [ENV ...] [--json]`: reset, call, sandboxed call and verify latencies, and RSS.

`--tau2 DOMAIN --from CHECKOUT` measures an imported τ² domain beside τ²'s own environment on the
same tasks instead (`ops.commands.tau2_parity`).

Runs over every executable environment that loads (bundled and on the environment path) unless
names are given. The sandboxed numbers need `arena.sandbox`; without it they are null and a note
says why.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio

from arena.env.bench import (
    TARGETS,
    BenchReport,
    EnvBench,
    bench_call_sandboxed,
    bench_environment,
    bench_instances,
    percentile,
    pick_call,
    template_kb,
)
from arena.env.errors import EnvLoadError
from arena.env.loader import load_environment
from arena.env.registry import discover
from arena.env.runtime import Environment
from ops.cli import Cli, CliError
from ops.commands.envs import env_path_of, env_path_parent, quiet_logs
from ops.commands.tau2_parity import add_side_arguments
from ops.config_public import TAU2_DOMAINS

SANDBOX_CALLS = 60


def _environments(args: argparse.Namespace, notes: list[str]) -> list[Environment]:
    found = discover(env_path_of(args))
    names = args.envs or list(found)
    unknown = [n for n in names if n not in found]
    if unknown:
        raise CliError(f"unknown environment(s): {', '.join(unknown)} (known: {', '.join(found) or 'none'})")
    envs = []
    for name in names:
        try:
            env = load_environment(found[name])
        except EnvLoadError as exc:
            notes.append(
                f"{name}: skipped, does not load ({len(exc.problems)} problems: arena envs check {name})"
            )
            continue
        if env.kind != "executable":
            continue
        if env.sandboxed:
            notes.append(f"{name}: skipped, its tools may only run sandboxed ({env.origin})")
            continue
        envs.append(env)
    if not envs:
        raise CliError("no executable environment to benchmark")
    return envs


def _sandbox_pool_class() -> Any:
    """`SandboxPool`, or None when `arena.sandbox` is not installed."""
    try:
        from arena.sandbox import SandboxPool
    except ImportError:
        return None
    return SandboxPool


async def _sandboxed(envs: list[Environment], results: list[EnvBench], notes: list[str]) -> None:
    pool_class = _sandbox_pool_class()
    if pool_class is None:
        notes.append("call_p50_us_sandboxed: arena.sandbox is not available")
        return
    try:
        async with pool_class() as pool:
            for env, result in zip(envs, results, strict=True):
                samples = await bench_call_sandboxed(env, pick_call(env), pool, SANDBOX_CALLS)
                result.call_p50_us_sandboxed = percentile(samples, 50)
    except Exception as exc:  # a sandbox that cannot start here is a finding to print, not a crash
        notes.append(f"call_p50_us_sandboxed: the sandbox failed: {type(exc).__name__}: {exc}")


async def _run(args: argparse.Namespace, envs: list[Environment], notes: list[str]) -> list[EnvBench]:
    results = [await bench_environment(env, iterations=args.iterations) for env in envs]
    if not args.no_sandbox:
        await _sandboxed(envs, results, notes)
    return results


def _tau2(args: argparse.Namespace) -> int:
    """`--tau2 DOMAIN`: the imported τ² domain beside τ²'s own environment, in one run."""
    from ops.commands.envs import daemon_config
    from ops.commands.tau2_parity import env_comparison, timing_text

    doc = env_comparison(args, daemon_config(args))
    if args.json:
        print(json.dumps({"tau2": doc}, indent=2))
        return 0
    print(f"τ² {doc['domain']} @ {(doc['commit'] or 'unknown')[:12]}, {doc['tasks']} tasks (medians):")
    print("\n".join(timing_text(doc)))
    return 0


def cmd_bench_env(args: argparse.Namespace) -> int:
    """`arena bench env`."""
    quiet_logs()
    if args.tau2:
        return _tau2(args)
    notes: list[str] = []
    envs = _environments(args, notes)
    results = anyio.run(_run, args, envs, notes)
    biggest = max(envs, key=template_kb)
    rss, delta = bench_instances(biggest, args.instances)
    report = BenchReport(
        environments=results,
        instances_1000_rss_mb=rss,
        instances_1000_rss_delta_mb=delta,
        instances_env=biggest.name,
        notes=notes,
    )
    if args.instances != 1000:
        report.notes.append(f"instances_1000_* measured with {args.instances} instances")
    if args.json:
        print(json.dumps(report.model_dump(), indent=2))
        return 0
    _print_table(report)
    return 0


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.0f}"


def _print_table(report: BenchReport) -> None:
    head = f"{'environment':<18} {'reset p50':>10} {'reset p99':>10} {'call p50':>9} {'sandbox p50':>12} {'verify p50':>11}"
    print(head + "   (µs)")
    for r in report.environments:
        print(
            f"{r.env:<18} {_fmt(r.reset_p50_us):>10} {_fmt(r.reset_p99_us):>10} {_fmt(r.call_p50_us):>9} "
            f"{_fmt(r.call_p50_us_sandboxed):>12} {_fmt(r.verify_p50_us):>11}"
        )
    print(
        f"\n1,000 live instances of {report.instances_env}: {report.instances_1000_rss_mb:.0f} MB RSS "
        f"(+{report.instances_1000_rss_delta_mb:.0f} MB)"
    )
    print("targets: " + ", ".join(f"{k} ≤ {v:g}" for k, v in TARGETS.items()))
    for note in report.notes:
        print(f"note: {note}")


def register(cli: Cli) -> None:
    """Add `arena bench env`."""
    p = cli.group("bench", help="performance benchmarks (JSON with --json)").add_parser(
        "env", parents=[env_path_parent()], help="environment reset, call and verify latencies, instance RSS"
    )
    p.add_argument(
        "envs", nargs="*", metavar="ENV", help="environments to measure (default: every executable one)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--iterations", type=int, default=500, help="samples per measurement (default 500)")
    p.add_argument(
        "--instances", type=int, default=1000, help="live instances for the RSS figure (default 1000)"
    )
    p.add_argument("--no-sandbox", action="store_true", help="skip the sandboxed-call measurement")
    p.add_argument(
        "--tau2",
        metavar="DOMAIN",
        choices=TAU2_DOMAINS,
        help="instead: the imported τ² domain beside τ²'s own environment on the same tasks "
        "(reset, call and check; needs --from CHECKOUT and a side interpreter, --python)",
    )
    add_side_arguments(p)
    p.add_argument("--config", type=Path, help="TOML configuration (its data dir holds the τ² import)")
    p.add_argument("--limit", type=int, metavar="N", help="with --tau2: the first N tasks (default all)")
    p.set_defaults(func=cmd_bench_env)
