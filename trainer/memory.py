"""Giving memory back between the heavy phases (training, evaluation) of one long process, and
measuring what a phase took at its peak. The trimming itself is `simulate.heap`: the decode loop
trims after each batch too.

A GRPO round leaves reference cycles behind (the TRL trainer, its callbacks, the rollout model),
and CPU PyTorch frees tensors into glibc's heap, which keeps the pages. Without both steps a learn
bench run grew past 24 GB by its third evaluation and was killed by the kernel.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator

import anyio
import structlog

from simulate.heap import trim_heap

log = structlog.get_logger(__name__)


def resident_bytes() -> int | None:
    """The resident set size of this process (None where /proc is not available)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    import resource

    return pages * resource.getpagesize()


def release_memory(reason: str) -> None:
    """Collect cycles and return free heap pages to the OS (glibc `malloc_trim`; a no-op elsewhere)."""
    before = resident_bytes()
    collected = gc.collect()
    trim_heap()
    after = resident_bytes()
    log.info(
        "memory.released",
        reason=reason,
        collected=collected,
        rss_mb_before=None if before is None else before >> 20,
        rss_mb_after=None if after is None else after >> 20,
    )


_startup_frozen = False


def freeze_startup_heap() -> None:
    """Leave the objects alive now (imported modules, classes, the daemon's long-lived state) out
    of every later collection: once per process, at the daemon's start.

    Why: `release_memory` runs a full collection after each phase, and a full collection walks
    every tracked object while holding the interpreter lock, which stops the admin API's thread
    too. In `arena bench soak` a daemon's full collection took ~80 ms (6 a round, a third of the
    stand-in rounds' time) and the admin API's p99 under load was that pause; with the start-up
    objects frozen it took ~3 ms (`docs/soak.md`). Objects made later are still collected; the
    frozen ones are the process's imports and what lives as long as it does, and once per process
    bounds what a test process that runs many daemons keeps.
    """
    global _startup_frozen
    if _startup_frozen:
        return
    gc.collect()
    gc.freeze()
    _startup_frozen = True
    log.info("memory.startup_frozen", objects=gc.get_freeze_count())


class PeakRss:
    """The largest resident set size seen while a `track_peak_rss` block ran."""

    def __init__(self) -> None:
        self.bytes: int | None = None

    def observe(self) -> None:
        now = resident_bytes()
        if now is not None and (self.bytes is None or now > self.bytes):
            self.bytes = now

    @property
    def mb(self) -> int | None:
        """The peak in MiB (None when it could not be read)."""
        return None if self.bytes is None else self.bytes >> 20


@contextlib.asynccontextmanager
async def track_peak_rss(interval_s: float = 1.0) -> AsyncIterator[PeakRss]:
    """Sample this process's resident memory every `interval_s` while the block runs.

    The phases it measures do their heavy work in worker threads, so the event loop is free to
    sample. A peak shorter than the interval can be missed: the figure is a lower bound.
    """
    peak = PeakRss()

    async def sample() -> None:
        while True:
            peak.observe()
            await anyio.sleep(interval_s)

    async with anyio.create_task_group() as group:
        group.start_soon(sample)
        try:
            yield peak
        finally:
            peak.observe()
            group.cancel_scope.cancel()
