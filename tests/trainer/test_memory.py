"""`release_memory` frees what only a cycle kept alive (a finished trainer's leftovers)."""

from __future__ import annotations

import gc
import weakref

from structlog.testing import capture_logs

from trainer.memory import release_memory


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
