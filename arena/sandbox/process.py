"""Parent-side handle of one sandbox worker process: start, request/reply, kill, clean up.

The worker is spawned with anyio's process API (`anyio.open_process`) and spoken to over its
stdin/stdout pipes as anyio byte streams. Why not blocking pipes in `anyio.to_thread`: a call
costs a thread hand-off each way and a blocked read cannot be cancelled, whereas the event
loop's pipe transports are cancellable (a wall-clock timeout is a plain `fail_after`) and add no
thread switch to the fast path.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

# Not `from arena.sandbox import boundary`: the package's `__init__` imports this module (lazily).
import arena.sandbox.boundary as boundary
from arena.sandbox.framing import FrameError, encode_job, read_reply
from arena.sandbox.models import SandboxLimits, ViolationKind, classify_exit

# Private uids/gids are drawn from this range: far above any real account and any container's
# user-namespace mapping, so no other process on the machine shares one (RLIMIT_NPROC counts by uid).
UID_RANGE = (1_900_000_000, 2_100_000_000)
START_TIMEOUT_S = 60.0
# A worker's lifetime CPU budget is this many jobs' worth of CPU (and at least two minutes); the
# pool retires a worker before a job could run into it.
CPU_BUDGET_JOBS = 20


class SandboxStartError(RuntimeError):
    """A worker process could not be started or confined."""


@dataclass
class WorkerDied(Exception):
    """The worker went away mid-job; `kind` is the violation its exit status points to."""

    kind: ViolationKind
    detail: str


class WorkerProcess:
    """One running, confined worker: a bubblewrap process whose sandbox runs `arena.sandbox.worker`.

    `env` is the environment whose tools the worker has run in its own interpreter (None while it
    has run none): a worker never serves two environments (see `arena.sandbox.pool`).
    """

    def __init__(self, proc: anyio.abc.Process, *, uid: int | None) -> None:
        self.proc = proc
        self.uid = uid
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._reader = BufferedByteReceiveStream(proc.stdout)
        self.layers: dict[str, Any] = {}
        self.known_modules: set[tuple[str, int, int]] = set()
        self.env: str | None = None
        self.cpu_s = 0.0
        self.jobs = 0
        self.cpu_budget_s = 0
        self.last_used = 0.0

    @classmethod
    async def spawn(cls, limits: SandboxLimits, *, audit: bool = True, debug: bool = False) -> WorkerProcess:
        """Start a worker in its bubblewrap boundary and wait until it reports itself confined.

        Raises `SandboxStartError` (with the reason) where the boundary cannot be created: there is
        no weaker fallback.
        """
        found = await anyio.to_thread.run_sync(boundary.probe)
        if not found.available or found.bwrap is None:
            raise SandboxStartError(f"cannot create the sandbox boundary: {found.detail}")
        is_root = os.geteuid() == 0
        # Root gets no user namespace (it would map the worker to uid 0, which RLIMIT_NPROC never
        # binds): the worker drops to a private uid no other process uses instead.
        uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) if is_root else None
        argv, readable = boundary.command(
            [boundary.interpreter(), "-s", "-m", "arena.sandbox.worker"],
            disk_mb=limits.disk_mb,
            bwrap=found.bwrap,
            user_namespace=not is_root,
        )
        # A clean environment: nothing of the daemon's (tokens, database URLs) reaches the worker.
        env = {
            "PYTHONPATH": str(boundary.ARENA_DIR.parent),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "LANG": "C.UTF-8",
            "PATH": "/nonexistent",
        }
        try:
            # Shielded: a cancellation while the process starts would kill bubblewrap before its
            # sandbox is tied to it, without a handle to clean up after it (see `destroy`).
            with anyio.CancelScope(shield=True):
                proc = await anyio.open_process(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=None if debug else subprocess.DEVNULL,
                    cwd="/",
                    env=env,
                    start_new_session=True,
                )
        except OSError as exc:
            raise SandboxStartError(f"cannot start a sandbox worker: {exc}") from exc
        worker = cls(proc, uid=uid)
        worker.cpu_budget_s = int(max(120.0, CPU_BUDGET_JOBS * limits.cpu_seconds))
        setup = {
            "confine": {
                "cpu_budget_s": worker.cpu_budget_s,
                "memory_mb": limits.memory_mb,
                "max_processes": limits.max_processes,
                "disk_mb": limits.disk_mb,
                "work_dir": boundary.WORK_DIR,
                "drop_to": uid,
            },
            "readable": readable,
            "audit": audit,
            "cpu_seconds": limits.cpu_seconds,
        }
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                await worker._stdin.send(encode_job(setup))
                header, _ = await read_reply(worker._reader)
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            FrameError,
            TimeoutError,
        ) as exc:
            await worker.destroy()
            raise SandboxStartError(
                f"sandbox worker failed during start-up ({type(exc).__name__}; exit status {proc.returncode})"
            ) from None
        except BaseException:
            await worker.destroy()
            raise
        if not header.get("ready"):
            await worker.destroy()
            raise SandboxStartError(f"sandbox worker could not confine itself: {header.get('error')}")
        worker.layers = {**header.get("layers", {}), **_namespace_layers(found, is_root, limits)}
        return worker

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    async def request(self, job: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
        """Send one job and read its reply; raises `WorkerDied` if the worker went away."""
        try:
            await self._stdin.send(encode_job(job))
            header, blobs = await read_reply(self._reader)
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ) as exc:
            raise await self._death() from exc
        except FrameError as exc:
            raise WorkerDied("crashed", f"sent a malformed reply ({exc})") from exc
        self.jobs += 1
        cpu = header.get("cpu_s")
        if isinstance(cpu, int | float):
            self.cpu_s = float(cpu)
        return header, blobs

    async def _death(self) -> WorkerDied:
        with anyio.move_on_after(5):
            await self.proc.wait()
        code = self.proc.returncode
        # bubblewrap reports a command killed by signal N as exit status 128 + N (the worker
        # itself only ever exits with 0 or 1).
        if code is not None and 128 < code < 128 + 65:
            code = 128 - code
        kind, detail = classify_exit(code)
        return WorkerDied(kind, detail)

    def cpu_left(self) -> float:
        """CPU seconds left in the worker's lifetime budget."""
        return self.cpu_budget_s - self.cpu_s

    async def destroy(self) -> None:
        """Kill the worker and everything it started. Never raises.

        Killing bubblewrap is almost enough: its PID 1 inside the sandbox dies with it
        (parent-death signal), and the kernel then kills every process of the sandbox's PID
        namespace, however they were started or re-parented. Almost: bubblewrap's child arms that
        signal only once its parent lets it go on, so a worker killed while it starts (a cancelled
        start, a pool shutting down while it tops up its spares) left that child behind, asleep
        and re-parented to init, one per kill. Until it goes on, the child is still in bubblewrap's
        process group (the worker's own session): the whole group is killed, and whatever of it
        outlived bubblewrap is killed after it (`kill_group_remnants`).
        """
        with anyio.CancelScope(shield=True):
            pid = self.proc.pid
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
            with anyio.move_on_after(5):
                await self.proc.wait()
            kill_group_remnants(pid)
            with anyio.move_on_after(1):
                with contextlib.suppress(OSError):
                    await self.proc.aclose()


def kill_group_remnants(pgid: int) -> list[int]:
    """SIGKILL the processes left in process group `pgid` once its leader is gone; returns them.

    Only while no process has the pid `pgid` (its leader, bubblewrap, was reaped): the kernel
    never hands out a pid that is still some group's id, so these are the group's own members.
    """
    if os.path.exists(f"/proc/{pgid}"):
        return []
    killed = []
    for pid in _group_members(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after it.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _namespace_layers(found: boundary.Boundary, is_root: bool, limits: SandboxLimits) -> dict[str, str]:
    """What the bubblewrap command line gave the worker (the parent built it, so it knows)."""
    return {
        "namespaces": found.detail,
        "network": "network namespace of its own (only its loopback)",
        "pid": "PID namespace of its own (bubblewrap's PID 1 above it; nothing outside can be named)",
        "filesystem": (
            "mount namespace: read-only root with the Python installation and the arena package, "
            f"{limits.disk_mb} MB writable tmpfs at {boundary.WORK_DIR}"
        ),
        "user_namespace": "no (root: private uid instead)" if is_root else "yes",
    }
