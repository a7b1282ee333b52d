"""Processes the test suite started that are still running when it ends.

Every process the suite starts inherits `ARENA_TEST_RUN=<id>` from it (set before the xdist
workers start), so its leftovers are found by that mark wherever they were re-parented; the
sandbox's bubblewrap processes get a clean environment, so orphaned `bwrap` processes (re-parented
to init) that started during the run are listed too, as suspects (another suite on the machine may
own them): they are reported, never killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

MARK = "ARENA_TEST_RUN"


def _stat(pid: str) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after it.
    return [
        raw[raw.find(b"(") + 1 : raw.rfind(b")")].decode(errors="replace"),
        *raw[raw.rfind(b")") + 2 :].decode().split(),
    ]


def _start_ticks(fields: list[str]) -> int:
    return int(fields[20])  # starttime: clock ticks after boot (field 22 of stat)


def boot_ticks_now() -> int:
    """Now, in clock ticks after boot (the unit of a process's start time)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def find(run_id: str, since_ticks: int) -> tuple[dict[int, str], dict[int, str]]:
    """(marked leftovers, suspect orphaned bwrap processes): pid -> command name; zombies left out."""
    marked: dict[int, str] = {}
    suspects: dict[int, str] = {}
    needle = f"{MARK}={run_id}".encode()
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        fields = _stat(entry.name)
        if fields is None or fields[1] in ("Z", "X"):
            continue
        try:
            environ = Path(f"/proc/{entry.name}/environ").read_bytes()
        except OSError:
            environ = b""
        if needle in environ.split(b"\0"):
            marked[int(entry.name)] = fields[0]
        elif fields[0] == "bwrap" and fields[2] == "1" and _start_ticks(fields) >= since_ticks:
            suspects[int(entry.name)] = fields[0]
    return marked, suspects


def settle(run_id: str, since_ticks: int, grace_s: float = 10.0) -> tuple[dict[int, str], dict[int, str]]:
    """Wait up to `grace_s` for the suite's processes to exit; SIGKILL the marked ones still there.

    Returns what was found after the grace period (the marked ones are killed, the suspects not).
    """
    deadline = time.monotonic() + grace_s
    while True:
        marked, suspects = find(run_id, since_ticks)
        if not (marked or suspects) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for pid in marked:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return marked, suspects
