"""`release_memory` frees what only a cycle kept alive (a finished trainer's leftovers);
`track_peak_rss` sees a phase's peak after the memory is gone again."""

from __future__ import annotations

import gc
import weakref

import anyio
import pytest
from structlog.testing import capture_logs

from trainer.memory import release_memory, resident_bytes, track_peak_rss


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
