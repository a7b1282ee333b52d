"""`release_memory` frees what only a cycle kept alive (a finished trainer's leftovers);
`track_peak_rss` sees a phase's peak after the memory is gone again."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

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


ARENA_PROBE = """
import ctypes, ctypes.util, sys, tempfile, threading
from trainer.memory import limit_malloc_arenas

if sys.argv[1] == "capped":
    assert limit_malloc_arenas(1)
kept = []
together = threading.Barrier(4)


def allocate():
    kept.append(bytearray(64_000))
    together.wait()  # all four alive at once: no thread inherits a finished one's arena


threads = [threading.Thread(target=allocate) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile(suffix=".xml") as out:
    stream = ctypes.c_void_p(libc.fopen(out.name.encode(), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(open(out.name).read().count("<heap nr="))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc arenas")
@pytest.mark.parametrize(("mode", "heaps"), [("default", 5), ("capped", 1)])
def test_limit_malloc_arenas_keeps_threads_in_one_arena(mode: str, heaps: int) -> None:
    """Four allocating threads get four arenas of their own, unless the arenas are capped."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-c", ARENA_PROBE, mode], env=env, capture_output=True, text=True, check=True
    )
    assert int(out.stdout.strip()) == heaps


def test_limit_malloc_arenas_leaves_an_operator_setting_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False
    with pytest.raises(ValueError, match="at least 1"):
        limit_malloc_arenas(0)
