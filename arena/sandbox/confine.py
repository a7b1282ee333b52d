"""OS-level confinement of a sandbox worker, applied once at its start, before any untrusted code.

Runs inside the freshly started worker process (single-threaded, still with the daemon's
credentials). In order, each step recorded in the returned `Layers` so the pool can log exactly
what holds on this machine:

1. network namespace (`unshare(CLONE_NEWNET)`, as root; as non-root inside a new user namespace):
   only a downed loopback exists;
2. mount namespace + chroot (root only): a tmpfs of `disk_mb` becomes the root; the Python
   installation, the `arena` package and the system libraries are bind-mounted into it read-only
   (nosuid) at their own paths, plus `/dev/null`, `/dev/zero`, `/dev/urandom`; `/arena-sandbox` is the
   private, writable directory. Nothing else of the host's file system is visible;
3. resource limits: address space (baseline + `memory_mb`), lifetime CPU budget, processes of the
   worker's uid, file size, open files, no core dumps;
4. a private uid/gid (root only): a fresh high number no other process uses, so that
   `RLIMIT_NPROC`, which Linux does not apply to root, counts exactly this worker and its children;
5. seccomp (`arena.sandbox.seccomp`): no exec, no sockets, no namespaces, with no-new-privileges;
6. parent-death signal (the worker dies with the daemon) and child subreaper (orphans of a job
   stay the worker's children, so leftover processes are seen).

Without root, steps 2 and 4 are impossible: the file system is then only guarded by the audit
hook (`arena.sandbox.guard`) and the service user's own permissions, and `RLIMIT_NPROC` counts
every process of the service user (the limit is set to its current count plus `max_processes`).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from dataclasses import dataclass, field
from pathlib import Path

from arena.sandbox import seccomp

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

WORK_DIR = "/arena-sandbox"
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")
# System locations a Python extension module or the dynamic loader may need, read-only.
SYSTEM_PATHS = (
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/usr/share/zoneinfo",
)


@dataclass
class ConfineRequest:
    """What the parent asks a worker to apply (sent in the setup frame)."""

    uid: int
    gid: int
    root_dir: str  # an empty directory created by the parent: the tmpfs mount point / private dir
    cpu_budget_s: int  # lifetime CPU of the worker (jobs get their own, smaller, timer)
    memory_mb: int
    max_processes: int
    disk_mb: int
    parent_pid: int
    ro_paths: list[str] = field(default_factory=list)


@dataclass
class Layers:
    """Which confinement layers hold, and why a missing one is missing."""

    network: str = "none"
    filesystem: str = "none"
    uid: str = "unchanged"
    rlimits: list[str] = field(default_factory=list)
    seccomp: str = "none"
    work_dir: str = ""
    readable: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(
    libc: ctypes.CDLL, src: str | None, dst: str, fstype: str | None, flags: int, data: str | None
) -> None:
    enc = [None if s is None else s.encode() for s in (src, dst, fstype, data)]
    _check(libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {src or ''} on {dst}")


def minimal_roots(paths: list[str]) -> list[str]:
    """Existing, absolute, real paths with every path already covered by another one removed."""
    real: set[str] = set()
    for p in paths:
        if p and os.path.isabs(p) and os.path.exists(p):
            real.add(os.path.realpath(p))
    out: list[str] = []
    for p in sorted(real):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _chroot_into_tmpfs(libc: ctypes.CDLL, req: ConfineRequest, layers: Layers) -> None:
    """Private mount namespace, tmpfs root with read-only binds, chroot; root only."""
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    root = req.root_dir
    _mount(libc, "tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"size={req.disk_mb}m,mode=0755")
    binds = minimal_roots(req.ro_paths + list(SYSTEM_PATHS))
    for src in binds + list(DEVICES):
        if not os.path.exists(src):
            continue
        dst = root + src
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            Path(dst).touch()
        _mount(libc, src, dst, None, MS_BIND | MS_REC, None)
        # Devices keep their device nodes usable; everything else also loses device files.
        extra = 0 if src in DEVICES else MS_NODEV
        _mount(libc, None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | extra, None)
    work = root + WORK_DIR
    os.makedirs(work, mode=0o700)
    os.chown(work, req.uid, req.gid)
    os.chroot(root)
    os.chdir(WORK_DIR)
    layers.filesystem = "mount namespace + chroot: tmpfs root, read-only Python installation"
    layers.work_dir = WORK_DIR
    layers.readable = binds + list(DEVICES)


def _user_tasks(uid: int) -> int:
    """Processes and threads currently owned by `uid` (what RLIMIT_NPROC counts)."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                count += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return count


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _set_rlimits(req: ConfineRequest, is_root: bool, baseline: int, tasks: int, layers: Layers) -> None:
    address_space = baseline + req.memory_mb * (1 << 20)
    nproc = req.max_processes if is_root else tasks + req.max_processes
    limits = {
        "RLIMIT_AS": address_space,
        "RLIMIT_CPU": req.cpu_budget_s,
        "RLIMIT_NPROC": nproc,
        "RLIMIT_FSIZE": req.disk_mb * (1 << 20),
        "RLIMIT_NOFILE": 64,
        "RLIMIT_CORE": 0,
    }
    for name, value in limits.items():
        which = getattr(resource, name)
        try:
            resource.setrlimit(which, (value, value))
            layers.rlimits.append(f"{name}={value}")
        except (OSError, ValueError) as exc:
            layers.warnings.append(f"cannot set {name}: {exc}")
    if not is_root:
        layers.warnings.append(
            f"RLIMIT_NPROC counts every process of uid {os.getuid()} (not root, no private uid): "
            f"set to its current count + {req.max_processes}"
        )


def _drop_privileges(req: ConfineRequest, layers: Layers) -> None:
    os.setgroups([])
    os.setgid(req.gid)
    os.setuid(req.uid)
    if os.getuid() != req.uid or os.geteuid() != req.uid or os.getegid() != req.gid:
        raise OSError("privilege drop did not take effect")
    layers.uid = f"private uid {req.uid} gid {req.gid}"


def confine(req: ConfineRequest) -> Layers:
    """Apply every layer this process is allowed to; returns what was applied.

    Raises OSError only when a layer that root must always get fails half-way (a worker in an
    unknown state must not run jobs); the pool then reports the start failure.
    """
    libc = _libc()
    layers = Layers()
    is_root = os.geteuid() == 0
    # Measured while /proc is still visible (the chroot hides it).
    baseline = _vm_size_bytes()
    tasks = 0 if is_root else _user_tasks(os.getuid())
    if is_root:
        try:
            _check(libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
            layers.network = "network namespace (no interfaces up)"
        except OSError as exc:
            layers.warnings.append(f"no network namespace: {exc}")
        try:
            _chroot_into_tmpfs(libc, req, layers)
        except OSError as exc:
            layers.warnings.append(
                f"no mount namespace / chroot: {exc}; file access guarded by the audit hook"
            )
    else:
        try:
            _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")
            layers.network = "network namespace in a user namespace (no interfaces up)"
        except OSError as exc:
            layers.warnings.append(f"no network namespace: {exc}")
        layers.warnings.append("not root: no private uid and no chroot; files guarded by the audit hook")
    if not layers.work_dir:
        if is_root:
            os.chown(req.root_dir, req.uid, req.gid)
        os.chdir(req.root_dir)
        layers.work_dir = req.root_dir
        layers.readable = minimal_roots([*req.ro_paths, "/usr/share/zoneinfo"]) + list(DEVICES)
        layers.filesystem = "audit hook only (private directory, read-only Python installation)"
    _set_rlimits(req, is_root, baseline, tasks, layers)
    if is_root:
        _drop_privileges(req, layers)
    # Orphans of a job become the worker's children, so it can tell that a job left some behind.
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    try:
        seccomp.install(libc)
        layers.seccomp = "no exec, no sockets, no namespaces, no ptrace (no-new-privileges)"
    except OSError as exc:
        layers.warnings.append(f"no seccomp filter: {exc}")
    # After the uid change: a credential change clears the parent-death signal.
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != req.parent_pid:  # the daemon died before the signal was armed
        os._exit(1)
    return layers
