"""Confinement a worker applies to itself, inside its bubblewrap boundary, before any untrusted code.

bubblewrap (`arena.sandbox.boundary`) has already put the worker in its own user (unless the daemon
is root), mount, PID and network namespaces with a read-only root. Here, in the still
single-threaded worker, in order:

1. resource limits: address space (baseline + `memory_mb`), lifetime CPU budget, processes,
   file size, open files, no core dumps. `RLIMIT_NPROC` counts only this worker: Linux (5.14 and
   later) counts processes per user namespace and uid, and each worker has a user namespace of its
   own; when the daemon is root (no user namespace) the worker runs as a private uid that no other
   process has (Linux never applies `RLIMIT_NPROC` to uid 0);
2. root only: hand the writable directory to that private uid and drop to it (all capabilities go
   with uid 0);
3. child subreaper (orphans of a job stay the worker's children, so leftover processes are seen);
4. seccomp (`arena.sandbox.seccomp`): no exec, no sockets, no namespaces, with no-new-privileges;
5. parent-death signal (armed last: a credential change clears it).

Every step is required: a step that fails raises, and the pool reports a start failure instead of
running jobs with less isolation.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import signal
from dataclasses import dataclass, field

from arena.sandbox import seccomp

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_SEARCH_TOP = 1 << 47  # the x86-64 / arm64 user address space


@dataclass
class ConfineRequest:
    """What the parent asks a worker to apply (sent in the setup frame)."""

    cpu_budget_s: int  # lifetime CPU of the worker (jobs get their own, smaller, timer)
    memory_mb: int
    max_processes: int
    disk_mb: int
    work_dir: str
    drop_to: int | None = None  # root only: the private uid (and gid) to run as


@dataclass
class Layers:
    """Which confinement layers hold (the boundary's namespaces are filled in by the parent)."""

    namespaces: str = ""
    network: str = ""
    filesystem: str = ""
    pid: str = ""
    uid: str = ""
    rlimits: list[str] = field(default_factory=list)
    seccomp: str = ""
    work_dir: str = ""
    readable: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def address_space_bytes() -> int:
    """This process's address space (VmSize), found without /proc (the sandbox has none).

    A binary search on the soft `RLIMIT_AS`: mapping one more page succeeds exactly when the current
    size plus that page fits under the limit. About 35 mmap calls; single-threaded callers only.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    page = mmap.PAGESIZE
    lo, hi = 0, _SEARCH_TOP if hard == resource.RLIM_INFINITY else min(hard, _SEARCH_TOP)
    try:
        while hi - lo > page:
            mid = (lo + hi) // 2 // page * page
            resource.setrlimit(resource.RLIMIT_AS, (mid, hard))
            try:
                mmap.mmap(-1, page).close()
            except (OSError, MemoryError):
                lo = mid
            else:
                hi = mid
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return hi - page


def _set_rlimits(req: ConfineRequest, layers: Layers) -> None:
    limits = {
        "RLIMIT_AS": address_space_bytes() + req.memory_mb * (1 << 20),
        "RLIMIT_CPU": req.cpu_budget_s,
        "RLIMIT_NPROC": req.max_processes,
        "RLIMIT_FSIZE": req.disk_mb * (1 << 20),
        "RLIMIT_NOFILE": 64,
        "RLIMIT_CORE": 0,
    }
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
        layers.rlimits.append(f"{name}={value}")


def _drop_privileges(uid: int, work_dir: str, layers: Layers) -> None:
    os.chown(work_dir, uid, uid)
    os.chmod(work_dir, 0o700)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != uid:
        raise OSError("privilege drop did not take effect")
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise OSError("uid 0 could be regained after the drop")
    layers.uid = f"private uid {uid} (no capabilities)"


def confine(req: ConfineRequest) -> Layers:
    """Apply every layer; returns what was applied. Raises OSError if any step fails."""
    libc = _libc()
    layers = Layers(work_dir=req.work_dir)
    parent = os.getppid()
    _set_rlimits(req, layers)
    if req.drop_to is not None:
        _drop_privileges(req.drop_to, req.work_dir, layers)
    else:
        if os.geteuid() == 0:
            raise OSError("the worker runs as uid 0 in its namespace but was given no uid to drop to")
        layers.uid = f"uid {os.getuid()} of a user namespace of its own (no capabilities outside it)"
    os.chdir(req.work_dir)
    # Orphans of a job become the worker's children, so it can tell that a job left some behind.
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    seccomp.install(libc)
    layers.seccomp = "no exec, no sockets, no namespaces, no ptrace (no-new-privileges)"
    # After the uid change: a credential change clears the parent-death signal.
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # bubblewrap's PID 1 died before the signal was armed
        os._exit(1)
    return layers
