"""The Arena daemon: runs rounds through the six phases, with an admin API beside them.

Structure (one anyio task group):
- the admin API (`ops.admin_server`: uvicorn on a thread with its own event loop, so a scrape
  never waits for the round's work), started first so /healthz answers during start-up;
- a background scope with the readiness probe, the signal watcher and the /status snapshot's
  refresher (`ops.status.StatusSnapshot`: the admin thread never reads the store);
- the round loop, inside its own cancel scope so a grace-period timeout can cut it short.

Crash safety comes from the store: every phase persists its outputs and marks itself done in one
transaction, and work items inside a phase are idempotent, so a restart simply continues at the
first phase not done. Pause is persisted in `daemon_state` and honoured at safe points; stop and
SIGTERM drain at the next safe point, and after `daemon.grace_period_s` the work is cancelled
(nothing committed is lost; the in-flight item is redone on restart).

Threads: the run state the admin thread reads (`round`, `phase`, `paused`, `progress_state`, ...)
is assigned only here, each attribute as a whole value; pause/resume/stop run here too.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup

from arena.store import Store, repo
from ops.admin import check_exposure
from ops.admin_server import AdminServer
from ops.config import ArenaConfig
from ops.metrics import Metrics
from ops.models import ModelHub, observe_model_calls
from ops.phases import default_phases
from ops.phases.base import Phase, PhaseContext, StopRequested
from ops.status import StatusSnapshot
from trainer.memory import freeze_startup_heap, release_memory

log = structlog.get_logger(__name__)
VERSION = "0.1.0"


class Daemon:
    """One Arena daemon process (the admin API and /status see it through `ops.daemon_view`)."""

    def __init__(
        self,
        config: ArenaConfig,
        *,
        phases: Sequence[Phase] | None = None,
        store: Store | None = None,
        metrics: Metrics | None = None,
        models: ModelHub | None = None,
        max_rounds: int | None = None,
        handle_signals: bool = True,
        progress: Any = None,
    ) -> None:
        check_exposure(config.admin)  # refuse an unprotected public admin API before doing anything
        self.config = config
        self.phases: list[Phase] = list(phases) if phases is not None else default_phases()
        self.store = store or Store(
            config.database_url, busy_timeout_s=config.store.busy_timeout_s, pool_size=config.store.pool_size
        )
        self.metrics = metrics or Metrics()
        self.models = models or ModelHub(config, self.metrics)
        self.max_rounds = max_rounds
        self.handle_signals = handle_signals
        self.display = progress  # optional terminal progress (ops.progress.TerminalProgress)
        self.admin: AdminServer | None = None
        self.paused = False
        self.paused_since: str | None = None
        self.pause_reason = ""
        self.stopping = False
        self.ready = False
        self.round: int | None = None
        self.phase: str | None = None
        self.progress_state: dict[str, Any] = {"done": 0, "total": 0, "note": ""}
        self.rounds_completed = 0
        self.models_up = False
        self.sandbox: dict[str, Any] = {"available": None, "detail": "not probed yet"}
        self.status_snapshot = StatusSnapshot(VERSION)  # what /status serves (`ops.status`)
        # Cluster mode's episode workers (`cluster.backend = "ray"`), joined in `_prepare`.
        self.cluster: Any = None
        self._wake: anyio.Event | None = None
        # Created in run(): anyio scopes need a running event loop.
        self._work_scope: anyio.CancelScope | None = None
        self._bg_scope: anyio.CancelScope | None = None
        self._bg_tg: TaskGroup | None = None
        self.metrics.info.labels(version=VERSION).set(1)

    # --- control (called by the admin API and signal handler) ----------------------------------

    async def pause(self, actor: str, reason: str = "") -> bool:
        """Persist the pause flag; work stops at the next safe point. Returns whether it changed."""
        async with self.store.transaction() as s:
            changed = await repo.set_paused(s, True, actor=actor, reason=reason)
            state = await repo.get_daemon_state(s)
        self.pause_reason, self.paused_since = state.pause_reason, repo.as_utc_iso(state.paused_since)
        self.paused = True
        self.metrics.paused.set(1)
        log.info("daemon.paused", actor=actor, reason=reason, changed=changed)
        return changed

    async def resume(self, actor: str) -> bool:
        """Clear the pause flag and wake the round loop."""
        async with self.store.transaction() as s:
            changed = await repo.set_paused(s, False, actor=actor)
        self.paused, self.paused_since, self.pause_reason = False, None, ""
        self.metrics.paused.set(0)
        self._notify()
        log.info("daemon.resumed", actor=actor, changed=changed)
        return changed

    async def stop(self, actor: str) -> None:
        """Drain: finish the current work item, then exit."""
        async with self.store.transaction() as s:
            await repo.record_event(s, actor, "stop", {"round": self.round, "phase": self.phase})
        self._begin_stop(actor)

    def _begin_stop(self, why: str) -> None:
        if not self.stopping:
            log.info("daemon.stopping", by=why, round=self.round, phase=self.phase)
        self.stopping = True
        self._notify()

    async def _wait_for_change(self) -> None:
        # One event shared by every waiter (several episodes may wait at once); replaced only
        # once it has fired, so a notification always reaches everyone waiting.
        if self._wake is None or self._wake.is_set():
            self._wake = anyio.Event()
        await self._wake.wait()

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def safe_point(self) -> None:
        """Where pause and stop take effect: between episodes, optimizer steps and phases."""
        await anyio.lowlevel.checkpoint()
        while self.paused and not self.stopping:
            if self.display is not None:
                self.display.note("paused")
            await self._wait_for_change()
        if self.stopping:
            raise StopRequested

    def report_progress(self, done: int, total: int, note: str = "") -> None:
        """Progress of the current phase, for /status, metrics and the terminal."""
        self.progress_state = {"done": done, "total": total, "note": note}
        self.metrics.phase_progress.set(done / total if total else 0.0)
        if self.display is not None:
            self.display.update(done, total, note)

    # --- main -----------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Run until `--rounds`/`last_round` is reached or a stop/signal arrives; returns 0."""
        self._work_scope = anyio.CancelScope()
        self._bg_scope = anyio.CancelScope()
        log.info("daemon.start", version=VERSION, store=self.store.dialect, admin=self.config.admin.address)
        remove_observer = observe_model_calls(self.metrics)
        try:
            await self._serve()
        finally:
            remove_observer()
            if self.cluster is not None:
                with anyio.CancelScope(shield=True):
                    await self.cluster.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self.store.aclose()
        log.info("daemon.exit", rounds_completed=self.rounds_completed)
        return 0

    async def _serve(self) -> None:
        assert self._work_scope is not None and self._bg_scope is not None
        async with anyio.create_task_group() as tg:
            self.admin = AdminServer(self, self.config.admin)
            self.admin.bind()
            self.admin.start()
            try:
                tg.start_soon(self._background)
                await self._prepare()
                freeze_startup_heap()  # imports and long-lived state: out of each phase's collection
                with self._work_scope, contextlib.suppress(StopRequested):
                    await self._rounds()
                if self._work_scope.cancelled_caught:
                    log.warning("daemon.grace_period_expired", grace_s=self.config.daemon.grace_period_s)
            finally:
                self._bg_scope.cancel()
                with anyio.CancelScope(shield=True):
                    await self.admin.aclose()

    async def _prepare(self) -> None:
        from arena.sandbox.boundary import probe

        # Synthesized environments run only inside the sandbox boundary: where it cannot be
        # created, they are refused (every phase leaves them out, see load_envs), never run weaker.
        self.sandbox = (await anyio.to_thread.run_sync(probe)).model_dump(include={"available", "detail"})
        if not self.sandbox["available"]:
            log.error(
                "daemon.sandbox_unavailable",
                detail=self.sandbox["detail"],
                refused="synthesized environments",
            )
        if self.config.store.migrate_on_start:
            revision = await self.store.migrate()
            log.info("store.migrated", revision=revision)
        async with self.store.transaction() as s:
            state = await repo.get_daemon_state(s)
            published = await repo.latest_checkpoint(s, published=True)
        if published is not None and await anyio.Path(published.path).is_dir():
            self.models.policy_weights = Path(published.path)
        elif published is not None:  # TRAIN refuses to go on from the base weights; say why early
            log.error("daemon.published_policy_missing", checkpoint=published.id, path=published.path)
        self.pause_reason, self.paused_since = state.pause_reason, repo.as_utc_iso(state.paused_since)
        self.paused = state.paused
        self.metrics.paused.set(1 if self.paused else 0)
        if self.config.cluster.backend == "ray":
            from ops.cluster.pool import WorkerPool

            self.cluster = await WorkerPool(self.config, self.metrics).connect()
        if self.paused:
            log.warning("daemon.start_paused", since=self.paused_since, reason=state.pause_reason)
        await self.status_snapshot.refresh(self)  # /status has the store's figures once ready
        self.ready = True
        self.metrics.ready.set(1)

    async def _background(self) -> None:
        assert self._bg_scope is not None
        with self._bg_scope:
            async with anyio.create_task_group() as tg:
                self._bg_tg = tg
                tg.start_soon(self._readiness_loop)
                tg.start_soon(self.status_snapshot.keep_fresh, self)
                if self.handle_signals:
                    tg.start_soon(self._watch_signals)

    async def _readiness_loop(self) -> None:
        while True:
            up = await self.models.probe_all()
            if up != self.models_up:
                log.info("models.readiness", up=up)
            self.models_up = up
            self.metrics.ready.set(1 if self.ready and up else 0)
            await anyio.sleep(self.config.daemon.readiness_interval_s)

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                if not self.stopping:
                    log.info("daemon.signal", signal=signal.Signals(signum).name)
                    self._begin_stop(signal.Signals(signum).name)
                    if self._bg_tg is not None:
                        self._bg_tg.start_soon(self._grace_timer)
                else:
                    log.warning("daemon.second_signal", signal=signal.Signals(signum).name)
                    self._cancel_work()

    async def _grace_timer(self) -> None:
        await anyio.sleep(self.config.daemon.grace_period_s)
        self._cancel_work()

    def _cancel_work(self) -> None:
        if self._work_scope is not None:
            self._work_scope.cancel()

    # --- rounds --------------------------------------------------------------------------------------------

    async def _rounds(self) -> None:
        last = self.config.daemon.last_round
        while True:
            await self.safe_point()
            if self.max_rounds is not None and self.rounds_completed >= self.max_rounds:
                log.info("daemon.rounds_done", rounds=self.rounds_completed)
                return
            async with self.store.transaction() as s:
                round_no = await repo.next_round(s)
            if last is not None and round_no > last:
                log.info("daemon.last_round_reached", last_round=last)
                return
            await self._run_round(round_no)
            self.rounds_completed += 1

    async def _run_round(self, round_no: int) -> None:
        names = [p.name for p in self.phases]
        async with self.store.transaction() as s:
            rnd = await repo.ensure_round(s, round_no, names)
            rows = await repo.get_phases(s, round_no)
        self.round = round_no
        self.metrics.round.set(round_no)
        self.metrics.round_started.set(rnd.started_at.timestamp())
        previous = {n: rows[n].output for n in names if n in rows and rows[n].status == "done"}
        with structlog.contextvars.bound_contextvars(round=round_no):
            first = next((n for n in names if n not in previous), None)
            log.info("round.start", resume_at=first, done=list(previous))
            for index, phase in enumerate(self.phases):
                if phase.name in previous:
                    continue
                await self.safe_point()
                previous[phase.name] = await self._run_phase(
                    round_no, phase, previous, last=index == len(self.phases) - 1
                )
            self.phase = None
            self.metrics.enter_phase(None)
            self.metrics.rounds.inc()
            self.metrics.last_round_completed.set(time.time())
            log.info("round.completed")
            await self._prune()

    async def _prune(self) -> None:
        """Retention (`store.keep_*_rounds`) at the safe point between rounds: nothing a resumed
        round needs is touched (`arena.store.retention` says what is always kept)."""
        from arena.store.retention import Retention, prune, reclaim

        async with self.store.transaction() as s:
            pruned = await prune(s, Retention.of_settings(self.config.store))
        if pruned.total:
            log.info("store.pruned", **pruned.model_dump())
            try:
                await reclaim(self.store, pruned.tables)
            except Exception as exc:  # the prune is committed; a later round's vacuum catches up
                log.warning("store.reclaim_failed", tables=pruned.tables, error=str(exc)[:300])

    async def _run_phase(
        self, round_no: int, phase: Phase, previous: dict[str, dict[str, Any]], *, last: bool
    ) -> dict[str, Any]:
        failures = 0
        while True:
            await self.safe_point()
            async with self.store.transaction() as s:
                await repo.start_phase(s, round_no, phase.name)
            self.phase = phase.name
            self.metrics.enter_phase(phase.name)
            self.report_progress(0, 0)
            if self.display is not None:
                self.display.start(round_no, phase.name)
            ctx = PhaseContext(
                round=round_no,
                phase=phase.name,
                config=self.config,
                store=self.store,
                metrics=self.metrics,
                models=self.models,
                _safe_point=self.safe_point,
                _progress=self.report_progress,
                _outputs=dict(previous),
                sandbox_available=self.sandbox["available"],
                cluster=self.cluster,
            )
            started = time.monotonic()
            with structlog.contextvars.bound_contextvars(phase=phase.name):
                log.info("phase.start")
                try:
                    output = await phase.run(ctx)
                    summary = {"phases": {**previous, phase.name: output}} if last else None
                    async with self.store.transaction() as s:
                        await phase.persist(s, ctx, output)
                        await repo.finish_phase(
                            s, round_no, phase.name, output, complete_round=last, summary=summary
                        )
                    self.status_snapshot.poke()  # its figures (pass rates, curriculum) are in the store now
                except StopRequested:
                    log.info("phase.interrupted")
                    raise
                except Exception as exc:
                    failures += 1
                    await self._phase_failed(round_no, phase.name, exc, failures)
                    continue
                finally:
                    # Each phase's peak (evaluation KV caches, a trainer's optimizer state) is freed
                    # into glibc's heap, which keeps it: give it back before the next phase, so a
                    # daemon that runs for weeks holds one phase's peak, not the sum of all of them.
                    release_memory(f"{phase.name} phase")
                elapsed = time.monotonic() - started
                self.metrics.phase_duration.labels(phase=phase.name).observe(elapsed)
                log.info("phase.done", seconds=round(elapsed, 3))
                if self.display is not None:
                    self.display.finish()
                return output

    async def _phase_failed(self, round_no: int, name: str, exc: Exception, failures: int) -> None:
        self.metrics.phase_failures.labels(phase=name).inc()
        self.metrics.errors.labels(component="phase").inc()
        log.error("phase.failed", error=f"{type(exc).__name__}: {exc}", attempt=failures, exc_info=exc)
        async with self.store.transaction() as s:
            await repo.fail_phase(s, round_no, name, f"{type(exc).__name__}: {exc}")
        if failures >= self.config.daemon.max_phase_failures:
            # Keep the service up (and visible) instead of crash-looping; an operator resumes it.
            await self.pause("daemon", reason=f"phase {name} failed {failures} times: {exc}")
            return
        with anyio.move_on_after(self.config.daemon.retry_backoff_s * 2 ** (failures - 1)):
            while not self.stopping:
                await self._wait_for_change()
