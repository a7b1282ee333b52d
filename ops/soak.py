"""`arena bench soak`: the real daemon for N rounds of stand-in work, measured after every round.

The daemon is `ops.daemon.Daemon` itself, with its real store (SQLite in a scratch data directory,
or the PostgreSQL database given), sandbox, admin API, metrics and retention; only the phases are
stand-ins (`ops.soak_phases`). After each round (retention included) it records the process's
resident memory, open files, threads, child processes and orphans (`ops.soak_probe`), the store's
size and rows per table (and its integrity check), the bytes under the data directory, the number
of exported metric series and the round's time. The report gives each figure's growth per round
after a warm-up window, and fails on any orphaned process, during or after the run.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import structlog
from pydantic import BaseModel, Field

from arena.protocols import ChatModel
from arena.store import Store, check_integrity, repo
from arena.store.retention import Retention
from ops.config import ArenaConfig, load_config
from ops.daemon import Daemon
from ops.soak_faults import AdminLoad, AdminLoadReport, DatabaseRestarter, DatabaseRestarts, WorkerKiller
from ops.soak_model import ModelServerFaults, ModelServerKiller, stand_in_model_server
from ops.soak_phases import StandInWork, standin_phases
from ops.soak_probe import sample_process, set_subreaper, tree_bytes
from ops.soak_samples import RoundSample, append_sample, read_samples
from ops.soak_train import DiskFaults

log = structlog.get_logger(__name__)
FIGURES = ("rss_bytes", "open_fds", "threads", "children", "store_bytes", "data_dir_bytes", "metric_series")


class SoakReport(BaseModel):
    """What `arena bench soak --json` prints."""

    rounds: int
    warmup: int
    store: str
    retention: dict[str, Any]
    work: StandInWork
    samples: list[RoundSample]
    growth_per_round: dict[str, float] = Field(
        default_factory=dict,
        description="Least-squares slope of each figure over the rounds after the warm-up.",
    )
    rss_growth_pct: float | None = None
    store_bytes_per_round_before_retention: float | None = None
    store_bytes_per_round_after_retention: float | None = None
    orphans_during: int = 0
    orphans_after: int = 0
    children_after: int = 0
    integrity_problems: int = 0
    worker_kills: dict[int, int] = Field(
        default_factory=dict, description="Round -> sandbox worker pid killed."
    )
    disk: DiskFaults = Field(default_factory=DiskFaults)
    database_restarts: DatabaseRestarts = Field(default_factory=DatabaseRestarts)
    model_server: ModelServerFaults = Field(default_factory=ModelServerFaults)
    phase_failures: dict[str, int] = Field(
        default_factory=dict, description="Failed phase attempts the daemon retried by itself, by phase."
    )
    episodes_lost: int = 0
    episodes_duplicated: int = 0
    admin_load: AdminLoadReport | None = None
    stalled: str | None = Field(None, description="Why the daemon paused itself, when it did.")
    seconds: float = 0.0
    notes: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every round ran, no orphan during or after, and a clean store."""
        bad = self.orphans_during or self.orphans_after or self.integrity_problems or self.stalled
        load_errors = sum(e.errors for e in self.admin_load.endpoints.values()) if self.admin_load else 0
        lost = self.episodes_lost or self.episodes_duplicated or self.disk.half_written_loaded
        return not (bad or lost or load_errors)


class SoakDaemon(Daemon):
    """The real daemon, measured after each of its rounds (nothing else differs).

    Each round's sample goes to `samples_file` at once and is read back for the report: a list
    of them in the daemon's memory would be part of what the soak measures (about 20 objects a
    round, and the pages they pin: the resident memory grew a quarter faster with it).
    """

    soak_store_files: set[Path]
    round_windows: dict[int, tuple[float, float]]
    foreign_processes: set[int]
    database_server_pids: set[int]
    samples_file: Path
    resumed = False
    fault_rounds: Any = staticmethod(dict)  # () -> RoundSample.faults

    async def _rounds(self) -> None:
        if self.resumed:  # the store is migrated by now
            await _sample_a_round_killed_after_its_commit(self, self.samples_file)
        await super()._rounds()

    async def _run_round(self, round_no: int) -> None:
        started = time.monotonic()
        await super()._run_round(round_no)
        self.round_windows[round_no] = (started, time.monotonic())
        append_sample(self.samples_file, await measure(self, round_no, time.monotonic() - started))


async def store_bytes(store: Store, files: set[Path]) -> int:
    """The store's size: its files on SQLite, `pg_database_size` on PostgreSQL."""
    if store.dialect == "postgresql":
        async with store.engine.connect() as conn:
            return int(
                (await conn.exec_driver_sql("SELECT pg_database_size(current_database())")).scalar_one()
            )
    return sum(p.stat().st_size for p in files if p.exists())


def metric_series(metrics: Any) -> int:
    """Exported series (samples of every metric family) on the daemon's registry."""
    return sum(len(family.samples) for family in metrics.registry.collect())


async def measure(daemon: SoakDaemon, round_no: int, seconds: float) -> RoundSample:
    """One round's sample (see the module's docstring)."""
    proc = sample_process(daemon.foreign_processes)
    async with daemon.store.transaction() as s:
        integrity = await check_integrity(s)
        episodes = await repo.episodes_for_round(s, round_no)
    return RoundSample(
        episodes=len(episodes),
        errored_episodes=sum(e.finish == "error" for e in episodes),
        round=round_no,
        seconds=round(seconds, 4),
        rss_bytes=proc.rss_bytes,
        open_fds=proc.open_fds,
        threads=proc.threads,
        children=proc.children,
        orphans=len(proc.orphans),
        adopted_reaped=proc.reaped,
        store_bytes=await store_bytes(daemon.store, daemon.soak_store_files),
        rows=integrity.counts,
        data_dir_bytes=tree_bytes(daemon.config.data.dir, {*daemon.soak_store_files, daemon.samples_file}),
        metric_series=metric_series(daemon.metrics),
        integrity_problems=integrity.problems,
        faults=daemon.fault_rounds(),
        database_server_pids=sorted(daemon.database_server_pids),
    )


def soak_config(
    data_dir: Path,
    database_url: str | None,
    keep_rounds: int | None,
    config_file: Path | None = None,
    last_round: int | None = None,
) -> ArenaConfig:
    """The soak's configuration: a scratch data directory, an ephemeral loopback admin port, the
    daemon stopping after `last_round` (a restarted run goes on to the same end);
    `keep_rounds` sets every `store.keep_*_rounds` and `trainer.keep_rounds` (None: the file's or
    the defaults)."""
    # A failed phase (a fault the soak injects) is retried after 0.1 s rather than the default 5 s.
    env = {
        "ARENA_DATA_DIR": str(data_dir),
        "ARENA_ADMIN__ADDRESS": "127.0.0.1:0",
        "ARENA_DAEMON__RETRY_BACKOFF_S": "0.1",
    }
    if database_url:
        env["ARENA_DATABASE_URL"] = database_url
    if last_round is not None:
        env["ARENA_DAEMON__LAST_ROUND"] = str(last_round)
    if keep_rounds is not None:
        for name in Retention.model_fields:  # each is `store.keep_<name>` (`Retention.of_settings`)
            env[f"ARENA_STORE__KEEP_{name.upper()}"] = str(keep_rounds)
        env["ARENA_TRAINER__KEEP_ROUNDS"] = str(keep_rounds)
    return load_config(config_file, environ=env)


def warmup_rounds(rounds: int, warmup: int | None) -> int:
    """Rounds left out of the growth figures: `warmup` (default a sixth), at most all but the last two."""
    return min(warmup if warmup is not None else rounds // 6, max(rounds - 2, 0))


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of (round, value) points (0 with fewer than two)."""
    if len(points) < 2:
        return 0.0
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    return statistics.linear_regression(xs, ys).slope


def summarize(report: SoakReport) -> SoakReport:
    """Fill in the growth figures from the samples."""
    after = [s for s in report.samples if s.round > report.warmup] or report.samples[-1:]
    for name in FIGURES:
        report.growth_per_round[name] = round(slope([(s.round, getattr(s, name)) for s in after]), 2)
    base = after[0].rss_bytes
    report.rss_growth_pct = round(100 * (max(s.rss_bytes for s in after) - base) / base, 2)
    keeps = [v for k, v in report.retention.items() if k in ("episode_rounds", "task_rounds") and v]
    first_prune = min(keeps) + 1 if keeps else None
    if first_prune is not None:
        before = [(s.round, s.store_bytes) for s in report.samples if s.round <= first_prune]
        pruned = [
            (s.round, s.store_bytes) for s in report.samples if s.round > max(first_prune, report.warmup)
        ]
        report.store_bytes_per_round_before_retention = round(slope(before), 1) if len(before) > 1 else None
        report.store_bytes_per_round_after_retention = round(slope(pruned), 1) if len(pruned) > 1 else None
    else:
        report.notes.append("no episode or task retention set: the store grows by design")
    report.orphans_during = sum(s.orphans for s in report.samples)
    expected = report.work.tasks * report.work.samples
    report.episodes_lost = sum(max(0, expected - s.episodes) for s in report.samples)
    report.episodes_duplicated = sum(max(0, s.episodes - expected) for s in report.samples)
    report.integrity_problems = sum(len(s.integrity_problems) for s in report.samples)
    return report


async def run_soak(
    rounds: int,
    *,
    warmup: int | None = None,
    database_url: str | None = None,
    keep_rounds: int | None = None,
    work: StandInWork | None = None,
    data_dir: Path | None = None,
    config_file: Path | None = None,
    kill_worker_every: int = 0,
    admin_load: AdminLoad | None = None,
    enospc_every: int = 0,
    database_restarter: DatabaseRestarter | None = None,
    kill_model_every: int = 0,
    resume: bool = False,
    samples_file: Path | None = None,
) -> SoakReport:
    """Run the soak; a scratch data directory unless `data_dir` is given. `kill_worker_every`:
    SIGKILL a sandbox worker mid-call in every N-th round; `admin_load`: scrape the admin API;
    `enospc_every`: a full disk during every N-th round's checkpoint save (`ops.soak_train`);
    `database_restarter`: restart the database server mid-phase (PostgreSQL only);
    `kill_model_every`: every episode calls a stand-in model server, SIGKILLed mid-EVALUATE and
    started again in every N-th round (`ops.soak_model`). `resume`: go on in `data_dir`'s store
    where a killed run stopped (`ops.soak_supervise`); `samples_file`: append each round's sample
    there as a JSON line as soon as it is taken."""
    work = work or StandInWork()
    if kill_worker_every and not work.call_seconds:
        work = work.model_copy(update={"call_seconds": 0.05})  # calls long enough to be caught in
    killer = WorkerKiller(kill_worker_every) if kill_worker_every else None
    disk = DiskFaults(enospc_every=enospc_every)
    async with stand_in_model_server(kill_model_every) as (model, model_killer):
        return await _soak(
            rounds, warmup, database_url, keep_rounds, work, data_dir, config_file, killer, admin_load,
            disk, database_restarter, model, model_killer, resume, samples_file,
        )  # fmt: skip


async def _soak(
    rounds: int,
    warmup: int | None,
    database_url: str | None,
    keep_rounds: int | None,
    work: StandInWork,
    data_dir: Path | None,
    config_file: Path | None,
    killer: WorkerKiller | None,
    admin_load: AdminLoad | None,
    disk: DiskFaults,
    database_restarter: DatabaseRestarter | None,
    model: ChatModel | None,
    model_killer: ModelServerKiller | None,
    resume: bool,
    samples_file: Path | None,
) -> SoakReport:
    with tempfile.TemporaryDirectory(prefix="arena-soak-") as scratch:
        root = data_dir or Path(scratch)
        config = soak_config(root, database_url, keep_rounds, config_file, last_round=rounds)
        started = time.monotonic()
        store = Store(config.database_url, busy_timeout_s=config.store.busy_timeout_s)
        if database_restarter is not None and store.dialect != "postgresql":
            await store.aclose()
            raise ValueError("a database restart needs a PostgreSQL store (--database-url)")
        try:
            if not resume:
                await _refuse_a_used_store(store)
            daemon = SoakDaemon(
                config,
                phases=standin_phases(work, disk, model, model_killer.report if model_killer else None),
                store=store,
                handle_signals=False,
            )
            # Only this run's samples are reported (a supervised soak's file holds its earlier daemons').
            daemon.samples_file = samples_file or root / "soak-samples.jsonl"
            if samples_file is None and not resume:
                daemon.samples_file.unlink(missing_ok=True)
            samples_from = daemon.samples_file.stat().st_size if daemon.samples_file.exists() else 0
            daemon.resumed = resume
            daemon.fault_rounds = lambda: {
                "worker_kill": sorted(killer.kills) if killer else [],
                "enospc": list(disk.injected),
                "database_restart": sorted(database_restarter.report.restarted) if database_restarter else [],
                "model_server_kill": sorted(model_killer.report.killed) if model_killer else [],
            }
            daemon.round_windows = {}
            daemon.foreign_processes, daemon.database_server_pids = set(), set()
            sqlite = config.database_url.split("///", 1)[-1]
            daemon.soak_store_files = {Path(sqlite + suffix) for suffix in ("", "-wal", "-shm")}
            subreaper = set_subreaper(True)
            try:
                beside = [x for x in (killer, admin_load, database_restarter, model_killer) if x is not None]
                stalled = await _run_watched(daemon, beside)
                await anyio.sleep(0.2)  # the last sandboxes' namespaces are torn down
                after = sample_process(daemon.foreign_processes)
            finally:
                if subreaper:
                    set_subreaper(False)
        finally:
            await store.aclose()
        report = SoakReport(
            rounds=rounds,
            warmup=warmup_rounds(rounds, warmup),
            store=store.dialect,
            retention=Retention.of_settings(config.store).model_dump(),
            work=work,
            samples=read_samples(daemon.samples_file, samples_from),
            orphans_after=len(after.orphans),
            children_after=after.children,
            seconds=round(time.monotonic() - started, 2),
            stalled=stalled,
            worker_kills=killer.kills if killer is not None else {},
            disk=disk,
            database_restarts=database_restarter.report
            if database_restarter is not None
            else DatabaseRestarts(),
            model_server=model_killer.report if model_killer is not None else ModelServerFaults(),
            phase_failures=_phase_failures(daemon),
            admin_load=admin_load.report(daemon.round_windows) if admin_load is not None else None,
        )
        if not subreaper:
            report.notes.append(
                "could not become a child subreaper: orphans re-parented to init are not seen"
            )
        return summarize(report)


def _phase_failures(daemon: SoakDaemon) -> dict[str, int]:
    registry = daemon.metrics.registry
    counts = {
        p.name: registry.get_sample_value("arena_phase_failures_total", {"phase": p.name})
        for p in daemon.phases
    }
    return {name: int(n) for name, n in counts.items() if n}


async def _run_watched(daemon: SoakDaemon, beside: list[Any]) -> str | None:
    """Run the daemon (and `beside` it, each one's `run(daemon)`); should it pause itself (a
    phase failing again and again), stop it and return why: an operator would be called."""
    stalled: str | None = None
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            nonlocal stalled
            while not daemon.paused:  # noqa: ASYNC110 - the daemon's flag has no event
                await anyio.sleep(0.1)
            async with daemon.store.transaction() as s:
                stalled = (await repo.get_daemon_state(s)).pause_reason or "paused"
            await daemon.stop("soak")

        tg.start_soon(watch)
        for extra in beside:
            tg.start_soon(extra.run, daemon)
        await daemon.run()
        tg.cancel_scope.cancel()
    return stalled


async def _sample_a_round_killed_after_its_commit(daemon: SoakDaemon, samples_file: Path) -> None:
    """A daemon killed after its round committed but before its sample was written: sample that
    round now (its episodes are what counts; the process figures are this daemon's)."""
    async with daemon.store.transaction() as s:
        last = await repo.last_completed_round(s)
    if last is None:
        return
    written = await anyio.to_thread.run_sync(read_samples, samples_file)
    if last.round not in {sample.round for sample in written}:
        append_sample(samples_file, await measure(daemon, last.round, 0.0))


async def _refuse_a_used_store(store: Store) -> None:
    """The soak writes rounds: it runs on an empty store only (a scratch PostgreSQL database)."""
    from sqlalchemy import inspect

    async with store.engine.connect() as conn:
        tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
        if "rounds" in tables and (await conn.exec_driver_sql("SELECT count(*) FROM rounds")).scalar_one():
            raise ValueError("the soak needs an empty store (a scratch database): this one has rounds")
