"""Giving memory back between the heavy phases (training, evaluation) of one long process.

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
import sys
from typing import Any

import structlog

log = structlog.get_logger(__name__)


def _resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    import resource

    return pages * resource.getpagesize()


@functools.cache
def _malloc_trim() -> Any:
    """glibc's `malloc_trim`, looked up once (`find_library` runs a subprocess); None without glibc."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return None
    # Not glibc (musl has no malloc_trim): nothing to trim.
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(libc_name).malloc_trim
    return None


def release_memory(reason: str) -> None:
    """Collect cycles and return free heap pages to the OS (glibc `malloc_trim`; a no-op elsewhere)."""
    before = _resident_bytes()
    collected = gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    after = _resident_bytes()
    log.info(
        "memory.released",
        reason=reason,
        collected=collected,
        rss_mb_before=None if before is None else before >> 20,
        rss_mb_after=None if after is None else after >> 20,
    )
