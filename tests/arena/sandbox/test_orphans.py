"""No sandbox process outlives its worker: killed while it starts, or SIGKILLed mid-call.

bubblewrap's child arms its parent-death signal only once bubblewrap lets it go on; a worker
killed in between used to leave that child behind, re-parented to init and asleep, one per kill.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.sandbox import SandboxLimits, SandboxPool, SandboxViolation, process
from arena.sandbox.process import WorkerProcess
from arena.sandbox.proctree import busy_sandbox_worker

pytestmark = pytest.mark.anyio
SLEEPER = "def main(p):\n    import time\n    time.sleep(p['s'])\n    return 1\n"


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pid of every bubblewrap a worker start launched (each is its own process group)."""
    pids: list[int] = []
    open_process = anyio.open_process

    async def recording(*args: Any, **kwargs: Any) -> Any:
        proc = await open_process(*args, **kwargs)
        pids.append(proc.pid)
        return proc

    monkeypatch.setattr(process.anyio, "open_process", recording)
    return pids


def _left_behind(groups: list[int]) -> dict[int, list[int]]:
    """Live processes of each process group in `groups` (a worker's bubblewrap and its sandbox)."""
    found = {}
    for pgid in groups:
        members = [pid for pid in process._group_members(pgid) if _alive(pid)]
        if members:
            found[pgid] = members
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2 : state.rfind(b")") + 3] != b"Z"


async def test_workers_cancelled_while_they_start_leave_no_process(spawned: list[int]) -> None:
    rng = random.Random(43)
    limits = SandboxLimits(cpu_seconds=2)
    for _ in range(24):
        with anyio.move_on_after(rng.uniform(0.0, 0.03)):
            worker = await WorkerProcess.spawn(limits)
            await worker.destroy()
    assert len(spawned) == 24
    await anyio.sleep(0.2)  # the kernel tears the killed namespaces down
    assert _left_behind(spawned) == {}


async def test_a_worker_sigkilled_mid_call_is_replaced_and_leaves_no_process(spawned: list[int]) -> None:
    async with SandboxPool(SandboxLimits(cpu_seconds=5), workers=1) as pool:
        assert await pool.run_program(SLEEPER, "main", {"s": 0}) == 1
        async with anyio.create_task_group() as tg:
            failures: list[BaseException] = []

            async def call() -> None:
                try:
                    await pool.run_program(SLEEPER, "main", {"s": 30})
                except SandboxViolation as exc:
                    failures.append(exc)

            tg.start_soon(call)
            victim = None
            with anyio.fail_after(20):
                while victim is None:
                    await anyio.sleep(0.05)
                    victim = busy_sandbox_worker()
            os.kill(victim, signal.SIGKILL)
        assert len(failures) == 1 and "killed by SIGKILL" in str(failures[0])
        assert await pool.run_program(SLEEPER, "main", {"s": 0}) == 1  # a replacement serves
    await anyio.sleep(0.2)
    assert _left_behind(spawned) == {}
