"""`SandboxPool`: long-lived, confined worker processes behind an async API.

```python
async with SandboxPool(SandboxLimits(cpu_seconds=2), workers=2) as pool:
    outcome = await pool.call_tool(env_dir, image, now=now, user_id=1, id_counters={},
                                   tool="get_order", arguments={"order_id": "ORD-1"})
    ok = await pool.run_check(source, initial_image, final_image, answer)
    value = await pool.run_program(source, "main", {"x": 1})
```

A `CapacityLimiter` of `workers` bounds concurrent jobs. Workers are never shared between
environments (`arena.sandbox.workers`): a tool job binds a clean worker to its environment for good,
and `workers` clean spares are kept started so that binding costs no start-up on the call path.
A job that breaks a limit raises `SandboxViolation`; its worker is killed (with every process of
its sandbox) and a clean replacement is started in the pool's task group, so neither the caller nor
the daemon goes down with it. `kills` / `kills_by_kind` count the kills and `on_kill(kind)` is
called for each, for the `arena_sandbox_kills_total` metric.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import structlog

from arena.sandbox.models import (
    ProgramEnv,
    SandboxCallRecord,
    SandboxLimits,
    SandboxProgramError,
    SandboxProgramOutcome,
    SandboxToolInfo,
    SandboxToolOutcome,
    SandboxViolation,
    ViolationKind,
    violation_from_wire,
)
from arena.sandbox.process import WorkerDied, WorkerProcess
from arena.sandbox.workers import WorkerSet
from arena.types import ToolSpec

log = structlog.get_logger(__name__)


class SandboxPool:
    """Sandbox worker processes, kept apart per environment; an async context manager.

    `max_idle` caps the idle workers kept warm for environments (default: twice `workers`, at
    least 4). `audit_hook=False` leaves out the in-process audit-hook layer (only for proving the
    OS layers alone in tests). `debug=True` lets workers write to the daemon's stderr.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        workers: int = 2,
        max_idle: int | None = None,
        audit_hook: bool = True,
        on_kill: Callable[[ViolationKind], None] | None = None,
        debug: bool = False,
    ) -> None:
        if workers < 1:
            raise ValueError("a sandbox pool needs at least one worker")
        self.limits = limits or SandboxLimits()
        self.size = workers
        self.kills = 0
        self.kills_by_kind: Counter[str] = Counter()
        self._on_kill = on_kill
        self._limiter = anyio.CapacityLimiter(workers)
        self._workers = WorkerSet(
            self.limits,
            spares=workers,
            max_bound=max(4, 2 * workers) if max_idle is None else max_idle,
            audit=audit_hook,
            debug=debug,
        )
        self._stack = AsyncExitStack()
        self._tg: anyio.abc.TaskGroup | None = None
        self._sources: dict[tuple[str, int, int], str] = {}

    @property
    def layers(self) -> dict[str, Any]:
        """The confinement layers the workers report (see `arena.sandbox.process`)."""
        return self._workers.layers

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> SandboxPool:
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        try:
            await self._workers.start(self._tg)
        except BaseException:
            self._tg.cancel_scope.cancel()
            await self._stack.aclose()
            raise
        layers = self.layers
        log.info(
            "sandbox_pool_started",
            workers=self.size,
            namespaces=layers.get("namespaces"),
            uid=layers.get("uid"),
            seccomp=layers.get("seccomp"),
            max_idle=self._workers.idle.max_bound,
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        await self._workers.shutdown()
        return await self._stack.__aexit__(exc_type, exc, tb)

    def _count_kill(self, kind: ViolationKind) -> None:
        self.kills += 1
        self.kills_by_kind[kind] += 1
        if self._on_kill is not None:
            try:
                self._on_kill(kind)
            except Exception as exc:  # an observer's bug must not break the sandbox
                log.warning("sandbox_kill_observer_failed", error=repr(exc))

    # ------------------------------------------------------------------ one job

    async def _run(
        self,
        job: dict[str, Any],
        what: str,
        module: tuple[str, int, int] | None = None,
        *,
        bind: bool = False,
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Run a job; `module` names its environment, and `bind` says its tools run in-process."""
        if self._tg is None or self._workers.closed:
            raise RuntimeError("the sandbox pool is not running: use `async with SandboxPool() as pool`")
        job["cpu_seconds"] = self.limits.cpu_seconds
        env = module[0] if module is not None else None
        async with self._limiter:
            worker = await self._workers.acquire(env, bind=bind)
            healthy = False
            try:
                header, blobs = await self._exchange(worker, job, what, module)
                healthy = worker.cpu_left() > self.limits.cpu_seconds + 2
                if not healthy:
                    log.info("sandbox_worker_recycled", pid=worker.pid, cpu_s=round(worker.cpu_s, 1))
                return header, blobs
            finally:
                if healthy:
                    self._workers.release(worker)
                else:
                    # Unknown state (violation, cancellation mid-job): never reuse it.
                    self._workers.retire(worker)

    async def _exchange(
        self, worker: WorkerProcess, job: dict[str, Any], what: str, module: tuple[str, int, int] | None
    ) -> tuple[dict[str, Any], list[bytes]]:
        wall = self.limits.wall_timeout_s
        try:
            with anyio.fail_after(wall):
                if module is not None and module not in worker.known_modules:
                    job = self._with_source(job, module)
                header, blobs = await worker.request(job)
                if header.get("missing_module") and module is not None:
                    header, blobs = await worker.request(self._with_source(job, module))
        except TimeoutError:
            raise self._violation(
                worker, "timeout", f"{what} ran past its wall-clock limit of {wall:g} s"
            ) from None
        except WorkerDied as dead:
            raise self._violation(
                worker, dead.kind, f"{what}: the worker {dead.detail}{self._limit_note(dead.kind)}"
            ) from None
        if "violation" in header:
            kind = str(header["violation"])
            raise self._violation(
                worker, kind, f"{what}: {header.get('detail', kind)}{self._limit_note(kind)}"
            )
        if module is not None:
            worker.known_modules.add(module)
        return header, blobs

    def _with_source(self, job: dict[str, Any], module: tuple[str, int, int]) -> dict[str, Any]:
        source = self._sources[module]
        if job.get("kind") == "program":
            return {**job, "env": {**job["env"], "source": source}}
        return {**job, "source": source}

    def _limit_note(self, kind: str) -> str:
        limits = self.limits
        notes = {
            "cpu": f" ({limits.cpu_seconds:g} s of CPU)",
            "memory": f" ({limits.memory_mb} MB)",
            "processes": f" ({limits.max_processes} processes)",
        }
        return notes.get(kind, "")

    def _violation(self, worker: WorkerProcess, kind: str, message: str) -> SandboxViolation:
        violation = violation_from_wire(
            kind, f"sandbox {kind} violation: {message} (worker killed and replaced)"
        )
        self._count_kill(violation.kind)
        log.warning("sandbox_violation", kind=violation.kind, pid=worker.pid, detail=message)
        return violation

    def _module(self, env_dir: Path | str) -> tuple[str, int, int]:
        """The (path, mtime, size) key of an environment's tools.py, its source cached by key."""
        path = Path(env_dir) / "tools.py"
        try:
            st = path.stat()
            key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
            if key not in self._sources:
                if len(self._sources) > 256:
                    self._sources.clear()
                self._sources[key] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SandboxProgramError(f"cannot read {path}: {exc}") from None
        return key

    # ------------------------------------------------------------------ public API

    async def call_tool(
        self,
        env_dir: Path | str,
        db_image: bytes,
        *,
        now: str,
        user_id: int | str,
        id_counters: dict[str, int],
        tool: str,
        arguments: dict[str, Any],
    ) -> SandboxToolOutcome:
        """Run one tool of `env_dir/tools.py` on a copy of `db_image` in a worker.

        Tool faults (unknown tool, bad arguments, `ToolError`, an exception, a write from a read
        tool) come back as `ok=False` outcomes, rolled back. Raises `SandboxViolation` when the
        call breaks a limit, `SandboxProgramError` when tools.py cannot be read.
        """
        module = self._module(env_dir)
        job = {
            "kind": "tool",
            "module": module,
            "source": None,
            "tool": tool,
            "arguments": arguments,
            "image": db_image,
            "now": now,
            "user_id": user_id,
            "counters": dict(id_counters),
        }
        header, blobs = await self._run(job, f"tool call {tool}", module, bind=True)
        ok = bool(header.get("ok"))
        return SandboxToolOutcome(
            tool=tool,
            ok=ok,
            result=json.loads(header["result_json"])
            if ok and header.get("result_json") is not None
            else None,
            error=header.get("error"),
            error_kind=header.get("error_kind"),
            writes=bool(header.get("changed")),
            db_image=blobs[0] if blobs else db_image,
            id_counters=header.get("counters") or dict(id_counters),
            duration_us=float(header.get("duration_us", 0.0)),
        )

    async def describe_tools(self, env_dir: Path | str) -> list[SandboxToolInfo]:
        """The tools of a (model-written) tools.py, imported only inside a worker.

        Raises `SandboxProgramError` with the reason when the file does not load.
        """
        module = self._module(env_dir)
        header, _ = await self._run(
            {"kind": "describe", "module": module, "source": None}, "tools listing", module, bind=True
        )
        if not header.get("ok"):
            raise SandboxProgramError(str(header.get("error")))
        return [
            SandboxToolInfo(spec=ToolSpec(**t["spec"]), writes=bool(t["writes"])) for t in header["tools"]
        ]

    async def run_check(self, source: str, initial_image: bytes, final_image: bytes, answer: str) -> bool:
        """Run `check(initial, final, answer) -> bool` (read-only sqlite3 connections) in a worker.

        Raises `SandboxProgramError` when the check raises, is missing or returns a non-bool, and
        `SandboxViolation` when it breaks a limit.
        """
        job = {
            "kind": "check",
            "source": source,
            "initial": initial_image,
            "final": final_image,
            "answer": answer,
        }
        header, _ = await self._run(job, "python check")
        if not header.get("ok"):
            raise SandboxProgramError(str(header.get("error")))
        return bool(header["value"])

    async def run_program(self, source: str, entry: str, payload: dict[str, Any]) -> Any:
        """Run `entry(payload)` from `source` in a worker; JSON in, JSON out."""
        return (await self.execute_program(source, entry, payload)).result

    async def execute_program(
        self, source: str, entry: str, payload: Any, *, env: ProgramEnv | None = None
    ) -> SandboxProgramOutcome:
        """Run a program; with `env`, call `entry(payload, tools)` against that environment.

        `tools.call(name, args)` / `tools.<name>(**args)` run the environment's tools on the
        image inside the worker; the outcome lists every call, the final image and counters.
        Raises `SandboxProgramError` when the program fails, `SandboxViolation` on a violation.
        """
        try:
            payload_json = json.dumps(payload)
        except (TypeError, ValueError) as exc:
            raise SandboxProgramError(f"the payload is not JSON: {exc}") from None
        job: dict[str, Any] = {
            "kind": "program",
            "source": source,
            "entry": entry,
            "payload_json": payload_json,
        }
        module = None
        if env is not None:
            module = self._module(env.env_dir)
            job["env"] = {
                "module": module,
                "source": None,
                "image": env.db_image,
                "now": env.now,
                "user_id": env.user_id,
                "counters": dict(env.id_counters),
            }
        header, blobs = await self._run(job, f"program {entry}", module)
        if not header.get("ok"):
            raise SandboxProgramError(str(header.get("error")))
        outcome = SandboxProgramOutcome(
            result=json.loads(header["result_json"]), stdout=header.get("stdout", "")
        )
        if env is not None:
            outcome.calls = [SandboxCallRecord(**c) for c in header.get("calls", [])]
            outcome.db_image = blobs[0] if blobs else env.db_image
            outcome.id_counters = header.get("counters") or dict(env.id_counters)
        return outcome

    async def run_objects(self, backend: str, source_json: str, request_json: str) -> str:
        """Play a Python-object environment's `TracksRequest` (JSON) in a worker; the reply's JSON.

        `backend` names the environment's code (its folder and content version): the job binds
        a worker to it, and its sources (`BackendSource` JSON) are sent once per worker. Raises
        `SandboxProgramError` when the backend does not load or cannot build the request's
        instances, `SandboxViolation` on a violation.
        """
        key = (f"objects:{backend}", len(source_json), zlib.crc32(source_json.encode()))
        if key not in self._sources:
            self._sources[key] = source_json
        job = {"kind": "objects", "module": key, "source": None, "request_json": request_json}
        header, _ = await self._run(job, "python-object calls", key, bind=True)
        if not header.get("ok"):
            raise SandboxProgramError(str(header.get("error")))
        return str(header["reply_json"])

    def stats(self) -> dict[str, Any]:
        """Counters for metrics and `arena status`."""
        return {
            "workers": self.size,
            "kills": self.kills,
            "kills_by_kind": dict(self.kills_by_kind),
            "started": self._workers.started,
            "idle_clean": len(self._workers.idle.clean),
            "idle_bound": self._workers.idle.bound_count(),
        }
