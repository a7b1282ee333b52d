"""What `arena bench soak` measures of its own process after each round (Linux `/proc`).

Resident memory, open file descriptors, OS threads, live child processes and orphans: the soak
makes its process a child subreaper (`PR_SET_CHILD_SUBREAPER`) for the run, so any process it
started that lost its parent (a sandbox's bubblewrap child whose worker was killed, say) is
re-parented to it instead of to init, and is found here as an *adopted* child: one the soak never
started itself (the processes it starts, bubblewrap, lead sessions of their own; a sandbox's inner
bubblewrap, PID 1 of its namespace, leads one too but is told apart by its namespace). An adopted
child still running is an orphan; one already dead (a sandbox's init re-parented while it was being
torn down) is reaped, as init would have, and only counted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path

from pydantic import BaseModel

from arena.sandbox.proctree import descendants, process_table

PR_SET_CHILD_SUBREAPER = 36


class ProcessSample(BaseModel):
    """The soak process's resources at one moment."""

    rss_bytes: int
    open_fds: int
    threads: int
    children: int  # live processes below the soak (sandbox workers with their sandboxes)
    orphans: list[int]  # adopted processes still running (see the module's docstring)
    reaped: int = 0  # adopted processes that had died (a dying sandbox's init, re-parented on its way out)


def sample_process(foreign: set[int] | None = None) -> ProcessSample:
    """Measure this process; adopted zombies are reaped after being counted (nobody else waits for
    them). `foreign`: processes below this one that are not the daemon's (a database server a fault
    restarted, adopted when the restart command exited), left out with everything below them."""
    status = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    me = os.getpid()
    table = process_table()
    below = descendants(table, me)
    if foreign:
        skip = {
            pid
            for root in foreign
            if root in table
            for pid in [root, *(r.pid for r in descendants(table, root))]
        }
        below = [row for row in below if row.pid not in skip]
    adopted = [row for row in below if row.ppid == me and (row.pid != row.pgid or _namespace_init(row.pid))]
    for row in adopted:
        if row.state == "Z":  # died after it was adopted: the kernel would have had init reap it
            with contextlib.suppress(ChildProcessError):
                os.waitpid(row.pid, os.WNOHANG)
    return ProcessSample(
        rss_bytes=int(status["VmRSS"].split()[0]) * 1024,
        open_fds=len(os.listdir("/proc/self/fd")),
        threads=int(status["Threads"]),
        children=sum(1 for row in below if row.state != "Z"),
        orphans=[row.pid for row in adopted if row.state != "Z"],
        reaped=sum(row.state == "Z" for row in adopted),
    )


def _namespace_init(pid: int) -> bool:
    """Whether `pid` is PID 1 of a PID namespace of its own (a sandbox's inner bubblewrap)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return any(line.startswith("NSpid:") and len(line.split()) > 2 for line in status.splitlines())


def set_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (or stop); returns whether the kernel agreed."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0


def tree_bytes(root: Path, skip: set[Path] | None = None) -> int:
    """Bytes of the files under `root` (`skip`: files left out, e.g. the SQLite store)."""
    total = 0
    skip = skip or set()
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if path in skip:
                continue
            with contextlib.suppress(OSError):
                total += path.lstat().st_size
    return total
