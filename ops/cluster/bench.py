"""`arena bench scale`: episodes per second in local mode and on a Ray cluster of 1 and 2 workers.

The same work in every mode: the bundled executable environments' hand-written autonomous tasks,
cycled to the wanted count, run through the phases' own machinery (`run_items`, each episode
committed to a scratch store as the daemon commits it). Two policies:

- `scripted-reference-fake`: a scripted fake (`simulate.scripted_reference`) that replays each
  task's reference calls, so the cost of an episode is the environment's (instance creation,
  reference replay for the expected state, tool calls, verification), not a model's;
- `embedded`: the real embedded model, each Ray worker loading its own copy.

Workers are warmed up (started, models loaded, one episode each) before the clock starts: the
figures are steady-state throughput. Ray's per-episode overhead is measured on the daemon's side
as the time between sending an episode and its reply beyond the worker's own time for it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, Field

from ops.phases.episodes import episode_values, run_items
from work.jobs import BatchRunner, EpisodeResult, Runner, WorkItem

log = structlog.get_logger(__name__)
FAKE = "scripted-reference-fake"


class ScaleRun(BaseModel):
    """One mode's measurement."""

    policy: str
    mode: str  # local | ray
    workers: int  # Ray workers (1 in local mode: the daemon's process)
    episodes: int
    seconds: float
    episodes_per_s: float  # the median run's, with `--repeat`
    repeats: list[float] = Field(default_factory=list)  # episodes/s of every run of this mode
    passed: int
    daemon_cpu_ms_per_episode: float = 0.0  # the daemon process's CPU (all threads) per episode
    worker_cpu_ms_per_episode: float | None = None  # Ray only: the workers' processes, all together
    batch_size: int | None = None  # Ray only: episodes per call to a worker
    dispatch_overhead_ms: float | None = None  # Ray only: round trip beyond the worker's own time
    instance_creation_ms: float | None = None  # Ray only: the worker's environment instance + tool view


class ScaleReport(BaseModel):
    """What `arena bench scale --json` prints."""

    envs: list[str]
    tasks: int
    cluster: dict[str, Any]
    store: str  # postgresql | sqlite: where the daemon committed each episode
    runs: list[ScaleRun]
    # The median over repeats of each repeat's 2-worker / 1-worker episodes/s.
    speedup_2_workers_over_1: dict[str, float] = Field(default_factory=dict)
    speedup_each_repeat: dict[str, list[float]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


def bench_tasks(names: list[str] | None) -> tuple[dict[str, Any], list[Any]]:
    """The bundled executable environments (or `names`) and their autonomous reference tasks."""
    from arena.env.registry import Registry
    from arena.tasks.toml_io import load_tasks

    envs: dict[str, Any] = {}
    tasks: list[Any] = []
    for name, env in Registry([]).load_all().items():
        if names and name not in names:
            continue
        if env.kind != "executable" or env.sandboxed or env.tasks_path is None:
            continue
        mine = [
            t
            for t in load_tasks(env.tasks_path, env=name, tools=env.tools)
            if t.mode == "autonomous" and t.reference and all(c.kind != "rubric" for c in t.checks)
        ]
        if mine:
            envs[name] = env
            tasks.extend(mine)
    missing = sorted(set(names or []) - set(envs))
    if missing:
        raise ValueError(
            f"no bundled executable environment with autonomous tasks named {', '.join(missing)}"
        )
    return envs, tasks


def work_items(tasks: list[Any], count: int, *, offset: int = 0) -> list[WorkItem]:
    """`count` episodes cycling over `tasks` (sample index = pass over the list, from `offset`)."""
    return [
        WorkItem(
            task_id=tasks[i % len(tasks)].full_id,
            env=tasks[i % len(tasks)].env,
            sample_idx=offset + i // len(tasks),
        )
        for i in range(count)
    ]


async def measure(
    ctx: Any,
    runner: Runner | BatchRunner,
    tasks: list[Any],
    *,
    episodes: int,
    warmup: int,
    concurrency: int,
    probe: Callable[[], Awaitable[float]] | None = None,
) -> tuple[float, float, int, float | None]:
    """Seconds and daemon CPU seconds for `episodes` after `warmup` untimed ones, how many passed,
    and how much `probe` (a counter such as the workers' CPU seconds) grew over the timed part."""
    from arena.store import repo

    passed = 0

    async def save(s: Any, batch: list[tuple[WorkItem, EpisodeResult]]) -> None:
        nonlocal passed
        passed += sum(bool(result.passed) for _, result in batch)
        await repo.upsert_episode_values(
            s, [episode_values(ctx.round, item, result, "bench") for item, result in batch]
        )

    warm = work_items(tasks, warmup, offset=10_000)
    await run_items(ctx, warm, runner, done=set(), save=save, concurrency=concurrency)
    passed = 0
    items = work_items(tasks, episodes)
    before = await probe() if probe is not None else 0.0
    started, cpu = time.perf_counter(), time.process_time()
    await run_items(ctx, items, runner, done=set(), save=save, concurrency=concurrency)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    grew = (await probe() - before) if probe is not None else None
    return seconds, cpu, passed, grew


@contextmanager
def local_ray_cluster(workers: int, worker_cpus: float) -> Iterator[str]:
    """A Ray cluster on this machine: a head with no CPUs and `workers` nodes of `worker_cpus` each."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        for _ in range(workers):
            cluster.add_node(num_cpus=worker_cpus)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()


@contextmanager
def scratch_store(postgres: str | None) -> Iterator[Any]:
    """A store of its own for the bench (it commits every episode, as the daemon does).

    With `postgres` (a server URL whose user may create databases) a fresh database there, dropped
    after: cluster mode's store, and what the daemon's per-episode commit costs in production.
    Without it a SQLite file in a temporary folder, whose commits cost the daemon several times more.
    """
    from arena.store import Store

    if postgres is None:
        folder = Path(tempfile.mkdtemp(prefix="arena-bench-scale-"))
        try:
            yield Store(f"sqlite+aiosqlite:///{folder / 'bench.db'}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    import psycopg

    admin = postgres.replace("postgresql+asyncpg://", "postgresql://", 1)
    name = f"arena_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        base = admin.rsplit("/", 1)[0] if admin.count("/") > 2 else admin
        yield Store(f"{base.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{name}")
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def bench_context(config: Any, store: Any, round_no: int, cluster: Any = None, policy: Any = None) -> Any:
    """A phase context for the bench (its own metrics; `policy` installed when given)."""
    from ops.metrics import Metrics
    from ops.models import ModelHub
    from ops.phases.base import PhaseContext

    models = ModelHub(config)
    if policy is not None:
        models.set("policy", policy)

    async def no_safe_point() -> None:
        return None

    return PhaseContext(
        round=round_no,
        phase="bench",
        config=config,
        store=store,
        metrics=Metrics(),
        models=models,
        _safe_point=no_safe_point,
        _progress=lambda done, total, note="": None,
        cluster=cluster,
    )
