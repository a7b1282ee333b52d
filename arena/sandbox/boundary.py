"""The namespace boundary of a sandbox worker, built with bubblewrap (`bwrap`).

Why bubblewrap: the boundary must be one that an unprivileged service user can create (the systemd
unit runs as `User=arena`, the Deployment with `runAsNonRoot`), and creating user, mount, PID and
network namespaces, bind-mounting a read-only view of the Python installation into an empty root
and pivoting into it, is a sequence of system calls that is easy to get subtly wrong (mount
propagation, `/proc` masks, uid maps, the order of `pivot_root` and `umount`). bubblewrap is the
small, maintained, audited tool that does exactly this and nothing more (Flatpak's sandbox is built
on it), it is packaged by Debian (`bubblewrap`), needs no daemon and no setuid bit on kernels that
allow unprivileged user namespaces, and fails with a clear message where namespaces are forbidden.

What one worker gets (`command`):

- a new user namespace (unless the daemon is root: root can create the other namespaces itself, and
  a user namespace would map the worker to uid 0, which `RLIMIT_NPROC` never binds; the worker then
  drops to a private uid instead, see `arena.sandbox.confine`), with further user namespaces
  disabled;
- a PID namespace: the worker's parent is bubblewrap's PID 1, which ignores signals from inside, and
  no process outside the namespace can be named, so the worker can signal nothing of the daemon's;
  when the worker's bubblewrap dies, the kernel kills every process of the namespace;
- a network namespace (only a loopback of its own), IPC, UTS and cgroup namespaces;
- a mount namespace whose root is an empty, read-only tmpfs holding read-only binds of the Python
  installation, the `arena` package and system libraries, a minimal `/dev` and a size-capped
  writable tmpfs at `WORK_DIR`. No `/proc`, no `/tmp`, no home, no store, no socket of the host.

`probe()` tells whether this machine can create that boundary; without it the pool does not start
(`SandboxStartError` with the reason) and the daemon refuses synthesized environments.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

WORK_DIR = "/arena-sandbox"
ARENA_DIR = Path(__file__).resolve().parent.parent  # the `arena` package directory
# System locations a Python extension module or the dynamic loader may need, read-only.
SYSTEM_PATHS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache", "/usr/share/zoneinfo")
PROBE_TIMEOUT_S = 30.0


class Boundary(BaseModel):
    """Whether the sandbox boundary can be created here, and how (or why not)."""

    available: bool
    detail: str
    bwrap: str | None = None
    user_namespace: bool = False


def find_bwrap() -> str | None:
    """The bubblewrap executable: `ARENA_BWRAP`, else `bwrap` on PATH or in /usr/bin."""
    configured = os.environ.get("ARENA_BWRAP")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap") or (shutil.which("bwrap", path="/usr/bin:/bin"))


def interpreter() -> str:
    """The interpreter a worker runs: `sys.executable` with its folder's symlinks resolved.

    The sandbox binds real paths only, so a virtual environment reached through a symlinked folder
    (`.venv -> /srv/venv`) must be started by its real folder's path; the file itself stays a
    symlink, so the interpreter still finds its `pyvenv.cfg`.
    """
    folder, name = os.path.split(sys.executable)
    return os.path.join(os.path.realpath(folder), name)


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


def readable_roots() -> list[str]:
    """What a worker may read: the Python installation and the `arena` package, nothing else.

    The interpreter's prefixes (the venv with its `pyvenv.cfg`, the base installation) and the
    `sys.path` entries inside them; the current directory or a script's folder (the daemon's data
    directory, say) never become readable.
    """
    prefixes = {
        os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    paths = [os.path.realpath(sys.executable)]
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if real and os.path.isdir(real) and any(real == p or real.startswith(p + "/") for p in prefixes):
            paths.append(real)
    # The venv itself (bin/python and pyvenv.cfg make the interpreter find its site-packages); a
    # base prefix of /usr is covered by its library folders and the executable, not bound whole.
    paths += [p for p in prefixes if p not in ("/usr", "/usr/local", "/")]
    paths.append(str(ARENA_DIR))
    return minimal_roots(paths)


def _parents(path: str) -> list[str]:
    parts = Path(path).parents
    return [str(p) for p in parts if str(p) != "/"]


def command(
    worker: list[str], *, disk_mb: int, bwrap: str, user_namespace: bool
) -> tuple[list[str], list[str]]:
    """The bubblewrap command line that runs `worker` confined; returns it and the readable paths."""
    argv = [bwrap]
    if user_namespace:
        argv += ["--unshare-user", "--disable-userns"]
    argv += [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
    ]
    roots = readable_roots()
    binds = minimal_roots(roots + list(SYSTEM_PATHS))
    # bubblewrap creates missing parents of a bind as 0700 directories of the sandbox's root; a
    # worker that drops to a private uid (daemon as root) must still be able to traverse them.
    for parent in sorted({p for b in binds for p in _parents(b)}, key=lambda p: (p.count("/"), p)):
        argv += ["--perms", "0755", "--dir", parent]
    for path in binds:
        argv += ["--ro-bind", path, path]
    # Merged-/usr systems reach the loader (/lib64/ld-linux-*.so) through top-level symlinks.
    for link in SYSTEM_PATHS:
        if os.path.islink(link) and not any(link.startswith(b + "/") for b in binds):
            argv += ["--symlink", os.readlink(link), link]
    argv += ["--dev", "/dev", "--size", str(disk_mb << 20), "--tmpfs", WORK_DIR]
    argv += ["--remount-ro", "/", "--chdir", WORK_DIR, "--", *worker]
    return argv, binds


def kernel_release() -> tuple[int, int]:
    """The running kernel's (major, minor) version."""
    numbers = os.uname().release.split("-")[0].split(".")
    try:
        return int(numbers[0]), int(numbers[1])
    except (IndexError, ValueError):
        return (0, 0)


@functools.cache
def probe() -> Boundary:
    """Start one confined, trivial interpreter; cached (namespace policy does not change at runtime)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return Boundary(
            available=False,
            detail="bubblewrap (bwrap) is not installed: install Debian's bubblewrap package",
        )
    user_ns = os.geteuid() != 0
    release = kernel_release()
    if user_ns and release < (5, 14):
        return Boundary(
            available=False,
            detail=f"kernel {'.'.join(map(str, release))} counts RLIMIT_NPROC per uid, not per user "
            "namespace (5.14 and later do): the process limit would count the service user's own "
            "processes",
            bwrap=bwrap,
            user_namespace=user_ns,
        )
    argv, _ = command([interpreter(), "-S", "-c", "pass"], disk_mb=1, bwrap=bwrap, user_namespace=user_ns)
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT_S,
            env={"LANG": "C.UTF-8", "PATH": "/nonexistent"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Boundary(available=False, detail=f"bubblewrap could not run: {exc}", bwrap=bwrap)
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        reason = why[-1] if why else f"exit status {done.returncode}"
        return Boundary(
            available=False,
            detail=f"bubblewrap cannot create the sandbox's namespaces here ({reason}); "
            + (
                "an unprivileged user needs user namespaces (kernel.unprivileged_userns_clone, "
                "user.max_user_namespaces, no RestrictNamespaces= or seccomp rule against them)"
                if user_ns
                else "root needs CAP_SYS_ADMIN to create mount, PID and network namespaces"
            ),
            bwrap=bwrap,
            user_namespace=user_ns,
        )
    how = "user, mount, PID, network" if user_ns else "mount, PID, network (root: private uid)"
    return Boundary(
        available=True, detail=f"bubblewrap: {how} namespaces", bwrap=bwrap, user_namespace=user_ns
    )
