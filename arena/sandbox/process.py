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
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from arena.sandbox.framing import FrameError, encode_job, read_reply
from arena.sandbox.models import SandboxLimits, ViolationKind, classify_exit

# Private uids/gids are drawn from this range: far above any real account and any container's
# user-namespace mapping, so no other process on the machine shares one (RLIMIT_NPROC counts by uid).
UID_RANGE = (1_900_000_000, 2_100_000_000)
START_TIMEOUT_S = 60.0
ARENA_DIR = Path(__file__).resolve().parent.parent  # the `arena` package directory
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


def readable_roots() -> list[str]:
    """What a worker may read: the Python installation and the `arena` package, nothing else.

    Only `sys.path` entries inside the interpreter's prefixes count: the current directory or a
    script's folder (the daemon's data directory, say) must never become readable.
    """
    prefixes = {
        os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    paths = []
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if real and os.path.isdir(real) and any(real == p or real.startswith(p + "/") for p in prefixes):
            paths.append(real)
    paths.append(str(ARENA_DIR))
    return paths


class WorkerProcess:
    """One running, confined worker."""

    def __init__(
        self, proc: anyio.abc.Process, *, uid: int, gid: int, root_dir: str, private_uid: bool
    ) -> None:
        self.proc = proc
        self.uid = uid
        self.gid = gid
        self.root_dir = root_dir
        self.private_uid = private_uid
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._reader = BufferedByteReceiveStream(proc.stdout)
        self.layers: dict[str, Any] = {}
        self.known_modules: set[tuple[str, int, int]] = set()
        self.cpu_s = 0.0
        self.jobs = 0
        self.cpu_budget_s = 0

    @classmethod
    async def spawn(cls, limits: SandboxLimits, *, audit: bool = True, debug: bool = False) -> WorkerProcess:
        """Start a worker and wait until it reports itself confined."""
        is_root = os.geteuid() == 0
        uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0]) if is_root else os.getuid()
        gid = uid if is_root else os.getgid()
        root_dir = tempfile.mkdtemp(prefix="arena-sandbox-")
        package_parent = str(ARENA_DIR.parent)
        # A clean environment: nothing of the daemon's (tokens, database URLs) reaches the worker.
        env = {
            "PYTHONPATH": package_parent,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "LANG": "C.UTF-8",
            "PATH": "/nonexistent",
        }
        try:
            proc = await anyio.open_process(
                [sys.executable, "-s", "-m", "arena.sandbox.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None if debug else subprocess.DEVNULL,
                cwd="/",
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            shutil.rmtree(root_dir, ignore_errors=True)
            raise SandboxStartError(f"cannot start a sandbox worker: {exc}") from exc
        except BaseException:  # cancelled while starting
            shutil.rmtree(root_dir, ignore_errors=True)
            raise
        worker = cls(proc, uid=uid, gid=gid, root_dir=root_dir, private_uid=is_root)
        worker.cpu_budget_s = int(max(120.0, CPU_BUDGET_JOBS * limits.cpu_seconds))
        setup = {
            "confine": {
                "uid": uid,
                "gid": gid,
                "root_dir": root_dir,
                "cpu_budget_s": worker.cpu_budget_s,
                "memory_mb": limits.memory_mb,
                "max_processes": limits.max_processes,
                "disk_mb": limits.disk_mb,
                "parent_pid": os.getpid(),
                "ro_paths": readable_roots(),
            },
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
        worker.layers = header.get("layers", {})
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
        kind, detail = classify_exit(self.proc.returncode)
        return WorkerDied(kind, detail)

    def cpu_left(self) -> float:
        """CPU seconds left in the worker's lifetime budget."""
        return self.cpu_budget_s - self.cpu_s

    async def destroy(self) -> None:
        """Kill the worker and everything it started, and remove its directory. Never raises."""
        with anyio.CancelScope(shield=True):
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
            await self._kill_descendants()
            with anyio.move_on_after(5):
                await self.proc.wait()
            with anyio.move_on_after(1):
                with contextlib.suppress(OSError):
                    await self.proc.aclose()
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.root_dir, ignore_errors=True))

    async def _kill_descendants(self) -> None:
        if self.private_uid:
            # Every process of the private uid, however it was started or re-parented. kill(-1)
            # from a process of that uid is atomic against concurrent forks.
            code = (
                f"import os; os.setgroups([]); os.setgid({self.gid}); os.setuid({self.uid}); os.kill(-1, 9)"
            )
            with anyio.move_on_after(10):
                await anyio.run_process(
                    [sys.executable, "-S", "-I", "-c", code],
                    check=False,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
