"""`arena bench soak [--json] [--rounds N] [--database-url URL] [--keep-rounds K]`: weeks in minutes.

The real daemon with stand-in phases for N rounds (`ops.soak`); exits 1 on any orphaned process
or store integrity problem.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import anyio

from arena.store.retention import Retention
from ops.cli import Cli, CliError
from ops.commands.envs import quiet_logs
from ops.soak import FIGURES, SoakReport, run_soak, soak_config
from ops.soak_faults import AdminLoad, DatabaseRestarter
from ops.soak_phases import StandInWork
from ops.soak_supervise import supervise_soak


def cmd_bench_soak(args: argparse.Namespace) -> int:
    """Run the soak and print its report."""
    quiet_logs()
    if args.rounds < 1:
        raise CliError("--rounds must be at least 1")
    if args.kill_daemon_every:
        return _supervised(args)
    load = None
    if args.admin_load:
        start = args.admin_load_from or max(2, args.rounds // 3)
        load = AdminLoad(args.admin_load, args.admin_load_seconds, start)
    restarter = None
    if args.restart_database_every or args.restart_database_command:
        if not (args.restart_database_every and args.restart_database_command):
            raise CliError("--restart-database-every and --restart-database-command go together")
        try:
            restarter = DatabaseRestarter(
                args.restart_database_every, shlex.split(args.restart_database_command)
            )
        except ValueError as exc:
            raise CliError(str(exc)) from None
    work = StandInWork(tasks=args.tasks, samples=args.samples, new_env_every=args.new_env_every)
    try:
        report = anyio.run(
            lambda: run_soak(
                args.rounds,
                warmup=args.warmup,
                database_url=args.database_url,
                keep_rounds=args.keep_rounds,
                work=work,
                config_file=args.config,
                kill_worker_every=args.kill_worker_every,
                admin_load=load,
                enospc_every=args.enospc_every,
                database_restarter=restarter,
                kill_model_every=args.kill_model_every,
                data_dir=args.data_dir,
                resume=args.resume,
                samples_file=args.samples_file,
            )
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(report.model_dump(mode="json") | {"ok": report.ok}, indent=2))
    else:
        _print(report)
    return 0 if report.ok else 1


def _supervised(args: argparse.Namespace) -> int:
    """The daemon in a child process, SIGKILLed in every N-th round (`ops.soak_supervise`)."""
    alone = {"--admin-load": args.admin_load, "--data-dir": args.data_dir, "--resume": args.resume}
    if any(alone.values()):
        given = ", ".join(name for name, value in alone.items() if value)
        raise CliError(f"--kill-daemon-every supervises its own daemon runs: drop {given}")
    child = ["--tasks", str(args.tasks), "--samples", str(args.samples)]
    passed = {
        "--keep-rounds": args.keep_rounds,
        "--database-url": args.database_url,
        "--config": args.config,
        "--kill-worker-every": args.kill_worker_every or None,
        "--enospc-every": args.enospc_every or None,
        "--kill-model-every": args.kill_model_every or None,
        "--restart-database-every": args.restart_database_every or None,
        "--restart-database-command": args.restart_database_command,
    }
    for flag, value in passed.items():
        if value is not None:
            child += [flag, str(value)]
    work = StandInWork(tasks=args.tasks, samples=args.samples)
    # What the children keep, as their own configuration says (the folder is theirs to pick).
    settings = soak_config(Path("."), args.database_url, args.keep_rounds, args.config).store
    retention = Retention.of_settings(settings).model_dump()
    report = anyio.run(
        lambda: supervise_soak(
            child,
            args.rounds,
            args.kill_daemon_every,
            work=work,
            seed=args.seed,
            warmup=args.warmup,
            retention=retention,
        )
    )
    if args.json:
        print(json.dumps(report.model_dump(mode="json") | {"ok": report.ok}, indent=2))
    else:
        _print(report)
        print(
            f"daemon killed mid-round: {len(report.daemon_kills.kills)}, processes it left: {report.daemon_kills.orphans_after_kills}"
        )
    return 0 if report.ok else 1


def _print(report: SoakReport) -> None:
    first, last = report.samples[0], report.samples[-1]
    print(
        f"{report.rounds} rounds on {report.store} in {report.seconds:.0f} s (warm-up {report.warmup} rounds)"
    )
    print(f"{'figure':<16} {'round 1':>14} {'last':>14} {'per round after warm-up':>24}")
    for name in FIGURES:
        print(
            f"{name:<16} {getattr(first, name):>14,} {getattr(last, name):>14,} {report.growth_per_round[name]:>24,}"
        )
    print(f"resident memory growth after warm-up: {report.rss_growth_pct}%")
    print(
        "store bytes per round before / after retention: "
        f"{report.store_bytes_per_round_before_retention} / {report.store_bytes_per_round_after_retention}"
    )
    print(f"orphaned processes: {report.orphans_during} during, {report.orphans_after} after")
    print(f"integrity problems: {report.integrity_problems}; children after the run: {report.children_after}")
    if report.worker_kills:
        print(
            f"sandbox workers killed mid-call: {len(report.worker_kills)} (rounds {sorted(report.worker_kills)})"
        )
    print(f"episodes lost / duplicated: {report.episodes_lost} / {report.episodes_duplicated}")
    if report.disk.injected:
        print(
            f"checkpoint saves on a full disk: {len(report.disk.injected)}, half-written loaded: {report.disk.half_written_loaded}"
        )
    if report.database_restarts.seconds:
        restarts = report.database_restarts.seconds
        print(
            f"database restarts mid-phase: {len(restarts)} (rounds {sorted(restarts)}), longest {max(restarts.values())} s"
        )
    if report.model_server.kills:
        model = report.model_server
        print(
            f"model server killed mid-phase: {len(model.kills)}, calls failed after retries: {model.failed_calls}"
        )
    if report.admin_load is not None:
        load = report.admin_load
        for path, e in load.endpoints.items():
            print(f"{path}: {e.requests} requests, {e.errors} errors, p50 {e.p50_ms} ms, p99 {e.p99_ms} ms")
        print(f"round time loaded / unloaded: {load.round_seconds_loaded} / {load.round_seconds_unloaded} s")
    for note in report.notes:
        print(f"note: {note}")
    print("OK" if report.ok else "FAILED")


def register(cli: Cli) -> None:
    """Add `arena bench soak`."""
    p = cli.group("bench", help="performance benchmarks (JSON with --json)").add_parser(
        "soak", help="the real daemon with stand-in phases for many rounds: growth, leaks, orphans"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--rounds", type=int, default=300, help="rounds to run (default 300)")
    p.add_argument(
        "--warmup", type=int, default=None, help="rounds left out of the growth figures (default: a sixth)"
    )
    p.add_argument(
        "--database-url",
        default=None,
        help="an empty scratch PostgreSQL database (default: SQLite in a scratch dir)",
    )
    p.add_argument(
        "--keep-rounds",
        type=int,
        default=None,
        help="set every store.keep_*_rounds and trainer.keep_rounds (default: the configuration's)",
    )
    p.add_argument("--tasks", type=int, default=6, help="stand-in tasks per round (default 6)")
    p.add_argument("--samples", type=int, default=2, help="episodes per task (default 2)")
    p.add_argument("--new-env-every", type=int, default=0, help="add a stand-in environment every N rounds")
    p.add_argument(
        "--kill-worker-every", type=int, default=0, help="SIGKILL a sandbox worker mid-call every N rounds"
    )
    p.add_argument(
        "--admin-load", type=float, default=0, help="scrape /metrics and /status at this rate (req/s)"
    )
    p.add_argument(
        "--enospc-every", type=int, default=0, help="a full disk during every N-th round's checkpoint save"
    )
    p.add_argument(
        "--kill-model-every",
        type=int,
        default=0,
        help="episodes call a stand-in model server, SIGKILLed mid-EVALUATE and restarted every N rounds",
    )
    p.add_argument(
        "--restart-database-every", type=int, default=0, help="restart PostgreSQL mid-phase every N rounds"
    )
    p.add_argument(
        "--restart-database-command",
        default=None,
        help="the command that restarts it and returns once it is up (e.g. 'pg_ctlcluster 15 main restart')",
    )
    p.add_argument("--admin-load-seconds", type=float, default=60, help="for this long (default 60 s)")
    p.add_argument("--admin-load-from", type=int, default=None, help="from this round (default: a third in)")
    p.add_argument("--config", type=Path, default=None, help="a configuration file to start from")
    p.add_argument(
        "--kill-daemon-every",
        type=int,
        default=0,
        help="SIGKILL the daemon mid-round every N rounds, restart it",
    )
    p.add_argument("--seed", type=int, default=0, help="where in each round the daemon is killed")
    p.add_argument(
        "--data-dir", type=Path, default=None, help="keep the run's data here (default: a scratch dir)"
    )
    p.add_argument("--resume", action="store_true", help="go on where a killed run in --data-dir stopped")
    p.add_argument(
        "--samples-file", type=Path, default=None, help="append each round's sample here (JSON lines)"
    )
    p.set_defaults(func=cmd_bench_soak)
