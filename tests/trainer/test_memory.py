"""`release_memory` frees what only a cycle kept alive (a finished trainer's leftovers);
`track_peak_rss` sees a phase's peak after the memory is gone again; `limit_malloc_arenas` really
caps the heaps glibc gives worker threads."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import anyio
import pytest
from structlog.testing import capture_logs

from trainer.memory import limit_malloc_arenas, release_memory, resident_bytes, track_peak_rss


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None
        self.payload = bytearray(1 << 20)


def test_release_memory_collects_cycles_and_reports_rss() -> None:
    gc.disable()  # no collection behind our back: only release_memory may free the cycle
    try:
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        assert alive() is not None
        with capture_logs() as logs:
            release_memory("test")
        assert alive() is None
    finally:
        gc.enable()
    (entry,) = [e for e in logs if e["event"] == "memory.released"]
    assert entry["reason"] == "test" and entry["collected"] >= 2
    assert entry["rss_mb_after"] > 0


@pytest.mark.anyio
async def test_track_peak_rss_sees_a_peak_that_is_gone_by_the_end() -> None:
    size = 256 << 20
    before = resident_bytes()
    assert before is not None
    async with track_peak_rss(interval_s=0.01) as peak:
        await anyio.sleep(0.05)
        block = b"\x01" * size  # every page written
        await anyio.sleep(0.1)
        del block
        release_memory("test")
        await anyio.sleep(0.05)
    after = resident_bytes()
    assert after is not None and after < before + size // 2  # given back before the block ended
    assert peak.mb is not None and peak.mb >= (before + size * 3 // 4) >> 20


# Eight threads that each allocate through malloc (100 KB is above pymalloc's small-object limit
# and below glibc's mmap threshold) while all are alive, then glibc's own statistics: one "Arena N:" line per arena.
_ARENA_PROBE = """
import ctypes, ctypes.util, sys, threading
from trainer.memory import limit_malloc_arenas
cap = limit_malloc_arenas(int(sys.argv[1])) if sys.argv[1] != "none" else None
keep = []
alive = threading.Barrier(8)
def work():
    alive.wait()  # all eight alive at once: none can inherit an exited thread's arena
    keep.append([bytearray(100_000) for _ in range(20)])
    alive.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(cap, flush=True)
ctypes.CDLL(ctypes.util.find_library("c")).malloc_stats()
"""


def _arenas_used(cap: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", _ARENA_PROBE, cap], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip(), sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc arenas")
def test_limit_malloc_arenas_keeps_worker_threads_in_few_arenas() -> None:
    reported, uncapped = _arenas_used("none")
    assert reported == "None" and uncapped > 2  # glibc gives each new allocating thread an arena
    reported, capped = _arenas_used("2")
    assert reported == "2" and capped == 2


def test_limit_malloc_arenas_leaves_an_operators_setting_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas(2) in (4, None)  # None: no glibc here
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    if limit_malloc_arenas(2) is not None:
        with pytest.raises(ValueError, match="at least 1"):
            limit_malloc_arenas(0)
