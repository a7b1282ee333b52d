"""The workers of a sandbox pool: started, kept idle apart per environment, retired.

Tool calls and tool listings run model-written `tools.py` code in the worker's own interpreter
(a fork per call would cost more than the call), so that code can change the worker for every
later job: monkeypatch `json`, `sqlite3` or `arena.env`, and with them the results, database
images and checks of whatever runs there next. A worker therefore belongs to the first environment
whose tools it runs, for the rest of its life, and only ever serves that environment again:

- clean workers have run no environment's tools. Checks and programs without an environment run
  only on them (in a child forked per job, so they stay clean); a tool job for an environment that
  has no idle worker of its own takes one and binds it. `spares` clean workers are kept started in
  the background, so binding costs no start-up on the call path;
- bound workers wait per environment. A program against an environment may also run on one of
  that environment's workers (forked too). At most `max_bound` of them stay idle; the least
  recently used beyond that are retired.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import structlog

from arena.sandbox.models import SandboxLimits
from arena.sandbox.process import SandboxStartError, WorkerProcess

log = structlog.get_logger(__name__)


@dataclass
class IdleWorkers:
    """Idle workers: `clean` ones and, per environment key, `bound` ones."""

    max_clean: int
    max_bound: int
    clean: list[WorkerProcess] = field(default_factory=list)
    bound: dict[str, list[WorkerProcess]] = field(default_factory=dict)

    def take(self, env: str | None) -> WorkerProcess | None:
        """An idle worker for a job of `env` (None: a job that must run on a clean worker)."""
        if env is not None and (own := self.bound.get(env)):
            worker = own.pop()
            if not own:
                del self.bound[env]
            return worker
        return self.clean.pop() if self.clean else None

    def put(self, worker: WorkerProcess) -> list[WorkerProcess]:
        """Keep `worker` idle; returns the workers to retire (beyond the caps), possibly itself."""
        worker.last_used = time.monotonic()
        if worker.env is None:
            if len(self.clean) >= self.max_clean:
                return [worker]
            self.clean.append(worker)
            return []
        self.bound.setdefault(worker.env, []).append(worker)
        surplus = self.bound_count() - self.max_bound
        if surplus <= 0:
            return []
        oldest = sorted(self._iter_bound(), key=lambda w: w.last_used)[:surplus]
        for old in oldest:
            assert old.env is not None
            self.bound[old.env].remove(old)
            if not self.bound[old.env]:
                del self.bound[old.env]
        return oldest

    def bound_count(self) -> int:
        """Idle workers that belong to an environment."""
        return sum(len(v) for v in self.bound.values())

    def _iter_bound(self) -> Iterator[WorkerProcess]:
        for workers in self.bound.values():
            yield from workers


class WorkerSet:
    """Every live worker of one pool; background work runs in the pool's task group."""

    def __init__(
        self, limits: SandboxLimits, *, spares: int, max_bound: int, audit: bool, debug: bool
    ) -> None:
        self.limits = limits
        self.spares = spares
        self.started = 0
        self.layers: dict[str, Any] = {}
        self.idle = IdleWorkers(max_clean=spares, max_bound=max_bound)
        self.closed = False
        self._audit = audit
        self._debug = debug
        self._starting = 0
        self._live: set[WorkerProcess] = set()
        self._tg: anyio.abc.TaskGroup | None = None

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Start the clean spares; raises `SandboxStartError` if one cannot start."""
        self._tg = tg
        try:
            async with anyio.create_task_group() as starting:
                for _ in range(self.spares):
                    starting.start_soon(self._start_clean)
        except BaseException as exc:
            await self.shutdown()
            starts = [e for e in getattr(exc, "exceptions", [exc]) if isinstance(e, SandboxStartError)]
            if starts:
                raise starts[0] from None
            raise

    async def shutdown(self) -> None:
        """Destroy every live worker (shielded from cancellation)."""
        with anyio.CancelScope(shield=True):
            self.closed = True
            workers = list(self._live)
            self._live.clear()
            async with anyio.create_task_group() as tg:
                for worker in workers:
                    tg.start_soon(worker.destroy)

    async def acquire(self, env: str | None, *, bind: bool) -> WorkerProcess:
        """An idle worker for a job of `env` (started now if none is idle); `bind` claims it."""
        worker = self.idle.take(env)
        if worker is None:
            worker = await self._spawn()  # every spare busy or starting: this job pays a start
        if bind and worker.env is None:
            worker.env = env
            self._keep_spares()
        return worker

    def release(self, worker: WorkerProcess) -> None:
        """A healthy worker back to the idle ones (or retired, beyond the caps)."""
        if self.closed:
            self._background(self._destroy, worker)
            return
        for surplus in self.idle.put(worker):
            self._background(self._destroy, surplus)

    def retire(self, worker: WorkerProcess) -> None:
        """Kill a worker in an unknown state, and keep the clean spares up."""
        self._background(self._destroy, worker)
        self._keep_spares()

    async def _spawn(self) -> WorkerProcess:
        worker = await WorkerProcess.spawn(self.limits, audit=self._audit, debug=self._debug)
        self.started += 1
        if self.closed:
            await worker.destroy()
            raise RuntimeError("the sandbox pool is closed")
        self._live.add(worker)
        if not self.layers:
            self.layers = worker.layers
        return worker

    async def _start_clean(self) -> None:
        self.release(await self._spawn())

    def _keep_spares(self) -> None:
        for _ in range(self.spares - len(self.idle.clean) - self._starting):
            self._starting += 1  # counted before it runs, so concurrent callers do not overshoot
            self._background(self._top_up)

    async def _top_up(self) -> None:
        try:
            await self._start_clean()
        except (SandboxStartError, RuntimeError) as exc:
            # Not retried here: a job that finds no spare starts its own and reports the error.
            log.error("sandbox_spare_start_failed", error=str(exc))
        finally:
            self._starting -= 1

    async def _destroy(self, worker: WorkerProcess) -> None:
        self._live.discard(worker)
        await worker.destroy()

    def _background(self, fn: Callable[..., Any], *args: Any) -> None:
        assert self._tg is not None
        # RuntimeError: the pool is shutting down, and `shutdown` destroys every live worker.
        with contextlib.suppress(RuntimeError):
            self._tg.start_soon(fn, *args)
