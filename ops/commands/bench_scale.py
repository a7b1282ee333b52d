"""`arena bench scale [--json]`: episodes/s in local mode and on Ray with 1 and 2 workers (`ops.cluster.bench`).

Without `--address` it starts its own Ray cluster on this machine (a head with no CPUs and two
one-CPU worker nodes) and stops it after; with `--address` it measures an existing cluster.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import anyio

from ops.cli import Cli, CliError
from ops.commands.envs import daemon_config, quiet_logs


async def _one_policy(
    args: argparse.Namespace, config: Any, store: Any, envs: dict[str, Any], tasks: list[Any], policy: str
) -> list[Any]:
    """Every mode's run of `policy`; the fake's `--repeat` times each, reported by the median."""
    from ops.cluster.bench import FAKE, bench_context
    from ops.phases.eval_runner import episode_runner
    from ops.phases.runtime import trainer_config
    from simulate.scripted_reference import ScriptedReferencePolicy
    from trainer.rollout import episode_view

    fake = ScriptedReferencePolicy(tasks) if policy == FAKE else None
    ctx = bench_context(config, store, 1, policy=fake)
    tconf = trainer_config(ctx.config, ctx.round, temperature=0.0)
    runner, runnable, skipped = await episode_runner(ctx, envs, tasks, episode_view(tconf), None)
    usable = [t for t in tasks if t.full_id in runnable]
    if not usable:
        raise CliError(f"no task could be prepared: {skipped[:3]}")
    repeats = max(1, args.repeat) if policy == FAKE else 1
    by_mode: dict[tuple[str, int], list[Any]] = {}
    for rep in range(repeats):
        # Rounds of their own per run: every run inserts its episodes, none replaces another's.
        first_round = (1 if policy == FAKE else 1000) + 10 * rep
        for run in await _one_repeat(
            args, config, store, ctx, runner, usable, tconf, fake, policy, first_round
        ):
            by_mode.setdefault((run.mode, run.workers), []).append(run)
    return [_median_run(runs) for runs in by_mode.values()]


async def _one_repeat(
    args: argparse.Namespace,
    config: Any,
    store: Any,
    local_ctx: Any,
    runner: Any,
    usable: list[Any],
    tconf: Any,
    fake: Any,
    policy: str,
    first_round: int,
) -> list[Any]:
    from ops.cluster.bench import FAKE, bench_context, measure
    from ops.cluster.pool import WorkerPool
    from trainer.rollout import episode_view
    from work.jobs import EpisodeJob

    count = args.episodes if policy == FAKE else args.model_episodes
    local_ctx.round = first_round
    seconds, cpu, passed, _ = await measure(
        local_ctx, runner, usable, episodes=count, warmup=1, concurrency=args.worker_concurrency
    )
    runs = [_run(policy, "local", 1, count, seconds, cpu, passed)]
    for workers in (1, 2):
        cluster = config.cluster.model_copy(
            update={
                "backend": "ray",
                "workers": workers,
                "worker_concurrency": args.worker_concurrency,
                # A model's episodes take seconds: a call's dispatch is nothing beside them.
                "batch_size": args.batch_size if policy == FAKE else 1,
            }
        )
        cfg = config.model_copy(update={"cluster": cluster})
        ctx = bench_context(cfg, store, first_round + workers)
        pool = await WorkerPool(cfg, ctx.metrics).connect()
        try:
            ctx.cluster = pool
            job = EpisodeJob(round=ctx.round, phase="bench", view=episode_view(tconf), policy=fake)
            remote = pool.runner(job, {t.full_id: t.model_dump(mode="json") for t in usable})
            seconds, cpu, passed, worker_cpu = await measure(
                ctx,
                remote,
                usable,
                episodes=count,
                warmup=workers * cluster.batch_size,  # a call per worker: started, loaded, warm
                concurrency=pool.episode_capacity,
                probe=pool.workers_cpu_s,
            )
            overhead = list(pool.overhead_s)[-count:]
            prepare = list(pool.prepare_s)[-count:]
        finally:
            await pool.close()
        run = _run(policy, "ray", workers, count, seconds, cpu, passed)
        run.dispatch_overhead_ms = round(1000 * sum(overhead) / len(overhead), 3)
        run.instance_creation_ms = round(1000 * sum(prepare) / len(prepare), 3)
        run.worker_cpu_ms_per_episode = round(1000 * (worker_cpu or 0.0) / count, 3)
        run.batch_size = cfg.cluster.batch_size
        runs.append(run)
    return runs


def _median_run(runs: list[Any]) -> Any:
    """The run with the median episodes/s (the lower middle one of an even count), listing all."""
    rates = [r.episodes_per_s for r in runs]
    chosen = next(r for r in runs if r.episodes_per_s == statistics.median_low(rates))
    chosen.repeats = rates
    return chosen


def _run(policy: str, mode: str, workers: int, episodes: int, seconds: float, cpu: float, passed: int) -> Any:
    from ops.cluster.bench import ScaleRun

    return ScaleRun(
        policy=policy,
        mode=mode,
        workers=workers,
        episodes=episodes,
        seconds=round(seconds, 3),
        episodes_per_s=round(episodes / seconds, 3),
        passed=passed,
        daemon_cpu_ms_per_episode=round(1000 * cpu / episodes, 3),
    )


async def _bench(args: argparse.Namespace, config: Any, address: str | None) -> Any:
    from ops.cluster.bench import FAKE, ScaleReport, bench_tasks, scratch_store

    try:
        envs, tasks = bench_tasks(args.env or None)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    config = config.model_copy(
        update={"cluster": config.cluster.model_copy(update={"address": address or config.cluster.address})}
    )
    runs: list[Any] = []
    with scratch_store(args.postgres) as store:
        async with store:
            await store.migrate()
            policies = [FAKE] + ([] if args.no_model else ["embedded"])
            for policy in policies:
                runs.extend(await _one_policy(args, config, store, envs, tasks, policy))
    speedup, each = {}, {}
    for policy in {r.policy for r in runs}:
        by_workers = {r.workers: r for r in runs if r.policy == policy and r.mode == "ray"}
        # Paired by repeat: the 1- and 2-worker runs of one repeat ran minutes apart on the same
        # machine, so their ratio cancels most of a shared machine's drift between repeats.
        ratios = [two / one for one, two in zip(by_workers[1].repeats, by_workers[2].repeats, strict=True)]
        speedup[policy] = round(statistics.median(ratios), 3)
        each[policy] = [round(r, 3) for r in ratios]
    return ScaleReport(
        envs=sorted(envs),
        tasks=len(tasks),
        cluster={"address": config.cluster.address, "started_here": False},
        runs=runs,
        speedup_2_workers_over_1=speedup,
        speedup_each_repeat=each,
        store="postgresql" if args.postgres else "sqlite",
        notes=[]
        if args.postgres
        else [
            "the store is a scratch SQLite file: its commits cost the daemon more than PostgreSQL's (--postgres)"
        ],
    )


def cmd_bench_scale(args: argparse.Namespace) -> int:
    """`arena bench scale`."""
    quiet_logs()
    try:
        import ray  # noqa: F401
    except ImportError:
        raise CliError("arena bench scale needs Ray: pip install '.[cluster]'") from None
    config = daemon_config(args)
    if args.address:
        report = anyio.run(_bench, args, config, args.address)
    else:
        from ops.cluster.bench import local_ray_cluster

        with local_ray_cluster(2, 1.0) as address:
            report = anyio.run(_bench, args, config, address)
        report.cluster["started_here"] = True
        report.notes.append("a local Ray cluster: a head with no CPUs and two worker nodes of 1 CPU")
    if args.json:
        print(json.dumps(report.model_dump(), indent=2))
        return 0
    print(
        f"{'policy':<26} {'mode':<6} {'workers':>7} {'episodes':>8} {'ep/s':>8} {'overhead ms':>11} {'instance ms':>11}"
    )
    for r in report.runs:
        over = "-" if r.dispatch_overhead_ms is None else f"{r.dispatch_overhead_ms:.1f}"
        inst = "-" if r.instance_creation_ms is None else f"{r.instance_creation_ms:.1f}"
        print(
            f"{r.policy:<26} {r.mode:<6} {r.workers:>7} {r.episodes:>8} {r.episodes_per_s:>8.2f} {over:>11} {inst:>11}"
        )
    for policy, ratio in report.speedup_2_workers_over_1.items():
        runs = ", ".join(f"{r:.2f}" for r in report.speedup_each_repeat.get(policy, []))
        print(f"{policy}: 2 workers = {ratio:.2f}x one worker (each repeat: {runs})")
    for note in report.notes:
        print(f"note: {note}")
    return 0


def register(cli: Cli) -> None:
    """Add `arena bench scale`."""
    p = cli.group("bench", help="performance benchmarks (JSON with --json)").add_parser(
        "scale", help="episodes/s in local mode and on Ray with 1 and 2 workers, and Ray's overhead"
    )
    p.add_argument("--config", help="daemon configuration (models, data dir, round caps)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--address", help="an existing Ray cluster (default: start one on this machine)")
    p.add_argument("--env", action="append", default=[], help="environment to draw tasks from (repeatable)")
    p.add_argument("--episodes", type=int, default=200, help="episodes with the scripted fake policy")
    p.add_argument("--model-episodes", type=int, default=8, help="episodes with the embedded model")
    p.add_argument("--worker-concurrency", type=int, default=2, help="episodes in flight per worker")
    p.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="episodes per call to a worker (the scripted fake's ~2 ms episodes share a call's dispatch, "
        "which costs the daemon ~1 ms of CPU)",
    )
    p.add_argument(
        "--postgres",
        metavar="URL",
        help="a PostgreSQL server whose user may create databases: the bench commits to a scratch "
        "database there, as cluster mode does (default: a scratch SQLite file)",
    )
    p.add_argument("--no-model", action="store_true", help="skip the embedded-model measurement")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of each mode with the scripted fake, reported by their median (a shared machine is noisy)",
    )
    p.set_defaults(func=cmd_bench_scale)
