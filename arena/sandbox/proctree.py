"""The process tree under a process, read from Linux `/proc`, and the sandbox worker in it that is
asleep inside a job: what fault injection (the soak's worker killer) and the sandbox's orphan test
kill mid-call.

It lives beside the sandbox, not in `ops`, so the sandbox tests that use it run from a copy of
`arena` alone (the unprivileged test step copies only `arena` and `tests`).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel


class ProcessRow(BaseModel):
    """One process of the table: its parent, process group, state and command name."""

    pid: int
    ppid: int
    pgid: int
    state: str
    comm: str


def process_table() -> dict[int, ProcessRow]:
    """Every process on the machine that `/proc` shows."""
    table: dict[int, ProcessRow] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/stat").read_bytes()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after it.
        comm = raw[raw.find(b"(") + 1 : raw.rfind(b")")].decode(errors="replace")
        fields = raw[raw.rfind(b")") + 2 :].split()
        pid = int(entry.name)
        table[pid] = ProcessRow(
            pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), state=fields[0].decode(), comm=comm
        )
    return table


def descendants(table: dict[int, ProcessRow], root: int) -> list[ProcessRow]:
    """The processes below `root`, however deep (zombies included)."""
    children: dict[int, list[int]] = {}
    for row in table.values():
        children.setdefault(row.ppid, []).append(row.pid)
    out, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out.append(table[pid])
        stack.extend(children.get(pid, []))
    return out


def busy_sandbox_worker(root: int | None = None) -> int | None:
    """A sandbox worker below `root` (this process by default) asleep in a job (`time.sleep`, seen
    as `nanosleep` in its wait channel), or None when none is."""
    for row in descendants(process_table(), os.getpid() if root is None else root):
        try:
            cmdline = Path(f"/proc/{row.pid}/cmdline").read_bytes()
            wchan = Path(f"/proc/{row.pid}/wchan").read_text()
        except OSError:
            continue
        if b"arena.sandbox.worker" in cmdline and "nanosleep" in wchan:
            return row.pid
    return None
