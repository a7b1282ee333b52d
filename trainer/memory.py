"""Giving memory back between the heavy phases (training, evaluation) of one long process, capping
glibc's per-thread arenas, and measuring what a phase took at its peak.

A GRPO round leaves reference cycles behind (the TRL trainer, its callbacks, the rollout model),
and CPU PyTorch frees tensors into glibc's heap, which keeps the pages. Without both steps a learn
bench run grew past 24 GB by its third evaluation and was killed by the kernel.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import structlog

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


@functools.cache
def _glibc() -> Any:
    """glibc, loaded once (`find_library` runs a subprocess); None elsewhere (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return None
    with contextlib.suppress(OSError):
        libc = ctypes.CDLL(libc_name)
        # musl has neither: nothing to tune or trim there.
        if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt"):
            return libc
    return None


# glibc's mallopt parameter number for the arena cap (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8
DEFAULT_MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = DEFAULT_MALLOC_ARENAS) -> int | None:
    """Cap glibc's malloc arenas for this process; returns the cap in force (None without glibc).

    glibc gives each thread that allocates its own heap arena (up to 8 per core) and keeps the
    freed pages of each. Decode batches, tokenization and grammar compilation run on worker
    threads, so a long process holds several arenas full of freed KV-cache and activation pages:
    a learn-bench evaluation reached 20 GiB resident that way. Call this first thing in the
    process, before threads allocate. `MALLOC_ARENA_MAX` set by the operator wins (glibc read it
    at start-up), so it is left alone.
    """
    libc = _glibc()
    if libc is None:
        return None
    configured = os.environ.get("MALLOC_ARENA_MAX", "").strip()
    if configured:
        return int(configured) if configured.isdigit() else None
    if arenas < 1:
        raise ValueError(f"malloc arenas must be at least 1, got {arenas}")
    if not libc.mallopt(_M_ARENA_MAX, arenas):
        log.warning("memory.arena_cap_refused", arenas=arenas)
        return None
    return arenas


def release_memory(reason: str) -> None:
    """Collect cycles and return free heap pages to the OS (glibc `malloc_trim`; a no-op elsewhere)."""
    before = resident_bytes()
    collected = gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
    after = resident_bytes()
    log.info(
        "memory.released",
        reason=reason,
        collected=collected,
        rss_mb_before=None if before is None else before >> 20,
        rss_mb_after=None if after is None else after >> 20,
    )


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
