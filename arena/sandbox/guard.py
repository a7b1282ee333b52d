"""The in-process layer of the sandbox: a Python audit hook and a fork tripwire.

This is a second layer, installed in the worker after the OS-level confinement
(`arena.sandbox.confine`) and after every trusted module is imported. What it guarantees:

- every audited operation it refuses is refused: opening files outside the private directory and
  the read-only Python installation (writes only in the private directory), listing other
  directories, symlinks and hard links, `os.system`, `os.exec*`, `os.posix_spawn`, `subprocess`,
  importing `_posixsubprocess` or `ctypes` anew, any `ctypes` foreign call, any `socket` or URL
  operation, `resource.setrlimit`, SQLite extension loading and non-memory SQLite files, and the
  `gc` object walkers. An audit hook cannot be removed once added.
- the first refusal of a job (or a fork refused by the process limit) is recorded so that the job
  becomes a `forbidden` / `processes` violation even if the code catches the exception.

What it does not guarantee: Python code running in the same interpreter can in principle reach
the recording state through frame introspection and clear it (the refusal itself still stands),
SQLite's `ATTACH` opens files without an audit event, and symlinks inside the read-only roots are
not resolved. The OS layers (the bubblewrap namespaces, seccomp, rlimits) are the
guarantees; this layer turns attempts into clear, early, classified errors.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import posix
import sys
from collections.abc import Callable
from typing import Any

# Whole families refused by event-name prefix (the part before the first dot).
_BLOCKED_PREFIXES = frozenset(
    {
        "socket",
        "ctypes",
        "subprocess",
        "urllib",
        "http",
        "ftplib",
        "smtplib",
        "poplib",
        "imaplib",
        "nntplib",
        "telnetlib",
        "webbrowser",
        "_winapi",
        "winreg",
    }
)
_BLOCKED_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.forkpty",
        "os.startfile",
        "pty.spawn",
        "os.symlink",
        "os.link",
        "os.mknod",
        "os.mkfifo",
        "resource.setrlimit",
        "resource.prlimit",
        "sqlite3.enable_load_extension",
        "sqlite3.load_extension",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
_BLOCKED_IMPORTS = frozenset({"_posixsubprocess", "subprocess", "ctypes", "_ctypes"})
# Events whose path arguments are checked: (argument index, needs write access).
_PATH_EVENTS: dict[str, tuple[tuple[int, bool], ...]] = {
    "os.listdir": ((0, False),),
    "os.scandir": ((0, False),),
    "os.chdir": ((0, False),),
    "os.getxattr": ((0, False),),
    "os.listxattr": ((0, False),),
    "os.mkdir": ((0, True),),
    "os.rmdir": ((0, True),),
    "os.remove": ((0, True),),
    "os.rename": ((0, True), (1, True)),
    "os.truncate": ((0, True),),
    "os.chmod": ((0, True),),
    "os.chown": ((0, True),),
    "os.utime": ((0, True),),
    "os.chflags": ((0, True),),
    "os.setxattr": ((0, True),),
    "os.removexattr": ((0, True),),
    "shutil.copyfile": ((0, False), (1, True)),
    "shutil.copymode": ((0, False), (1, True)),
    "shutil.copystat": ((0, False), (1, True)),
    "shutil.copytree": ((0, False), (1, True)),
    "shutil.rmtree": ((0, True),),
    "shutil.move": ((0, True), (1, True)),
    "shutil.unpack_archive": ((0, False), (1, True)),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Forbidden(PermissionError):
    """Raised inside the sandbox for an operation the audit hook refuses."""


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def _path_of(value: Any) -> str | None:
    """The path an argument names, or None for a file descriptor / no path."""
    if value is None or isinstance(value, int):
        return None
    try:
        raw = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return raw


def install(
    *, readable: list[str], writable: list[str], ipc_fds: tuple[int, ...], audit: bool = True
) -> tuple[Callable[[], None], Callable[[], tuple[str, str] | None]]:
    """Install the audit hook and the fork tripwire; returns `(reset, tripped)` for the job runner.

    `audit=False` leaves the hook out (only to prove the OS layers alone in tests).

    `tripped()` gives the first `(kind, message)` recorded since the last `reset()`. The state lives
    in this closure only (no module global that sandboxed code could switch off).
    """
    read_roots = tuple(os.path.normpath(p) for p in readable + writable)
    write_roots = (*tuple(os.path.normpath(p) for p in writable), "/dev/null")
    state: list[tuple[str, str]] = []
    # One shared page: a fork refused in any process of the job's tree (children included, whose
    # memory is otherwise their own) shows up in the worker.
    shared = mmap.mmap(-1, mmap.PAGESIZE)

    def refuse(kind: str, message: str) -> None:
        if not state:
            state.append((kind, message))
        raise Forbidden(f"sandbox: {message}")

    def check_path(event: str, value: Any, write: bool) -> None:
        raw = _path_of(value)
        if raw is None:
            return
        if not os.path.isabs(raw) and ".." in raw.replace("\\", "/").split("/"):
            refuse("forbidden", f"{event} of a relative path climbing with '..' ({raw!r}) is not allowed")
        full = os.path.normpath(os.path.join(os.getcwd(), raw))
        if write and not _under(full, write_roots):
            refuse("forbidden", f"writing {raw!r} is not allowed (only the private directory is writable)")
        if not write and not _under(full, read_roots):
            refuse("forbidden", f"reading {raw!r} is not allowed (outside the sandbox's directory)")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = ((*tuple(args), None, None, None))[:3]
            if isinstance(mode, str):
                write = any(c in mode for c in "wax+")
            else:
                write = bool((flags or 0) & _WRITE_FLAGS)
            check_path("open", path, write)
        elif event in _PATH_EVENTS:
            for index, write in _PATH_EVENTS[event]:
                if index < len(args):
                    check_path(event, args[index], write)
        elif event == "import":
            if args and args[0] in _BLOCKED_IMPORTS:
                refuse("forbidden", f"importing {args[0]} is not allowed")
        elif event in _BLOCKED_EVENTS or event.partition(".")[0] in _BLOCKED_PREFIXES:
            refuse("forbidden", f"{event} is not allowed")
        elif event == "sqlite3.connect":
            database = _path_of(args[0]) if args else None
            if database is None or database in ("", ":memory:"):
                return
            if database.startswith("file:"):
                target, _, query = database[5:].partition("?")
                if "mode=memory" in query:
                    return
                database = target
            check_path("sqlite3.connect", database, True)

    real_fork = os.fork

    def fork() -> int:
        """`os.fork` that records a refusal by the process limit as a `processes` violation."""
        try:
            return real_fork()
        except BlockingIOError:
            shared[0] = 1
            raise

    def close_ipc_in_child() -> None:
        # A forked child must never speak on the worker's pipes: only the worker replies.
        for fd in ipc_fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    os.register_at_fork(after_in_child=close_ipc_in_child)
    os.fork = fork
    posix.fork = fork
    if audit:
        sys.addaudithook(hook)

    def reset() -> None:
        state.clear()
        shared[0] = 0

    def tripped() -> tuple[str, str] | None:
        if state:
            return state[0]
        if shared[0]:
            return ("processes", "a fork was refused: the job wanted more processes than its limit")
        return None

    return reset, tripped
