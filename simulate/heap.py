"""glibc's heap, for a process that does its heavy work in CPU PyTorch: give its free pages back.

CPU PyTorch frees tensors into glibc's heap, and glibc keeps freed pages for reuse instead of
returning them to the OS. A decode loop that grows every layer's KV cache by one token a step
(a new, slightly larger tensor each time) leaves that heap full of freed pages it keeps. Capping
glibc's per-thread arenas (MALLOC_ARENA_MAX=2) did not help: the same evaluation peaked at 8.5 GiB
with two arenas and 8.1 GiB with the default sixteen. A no-op where the C library is not glibc
(macOS, musl).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import sys
from typing import Any


@functools.cache
def _malloc_trim() -> Any:
    """glibc's `malloc_trim`, looked up once (`find_library` runs a subprocess); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return None
    # Not glibc (musl has no malloc_trim): nothing to trim.
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(libc_name).malloc_trim
    return None


def trim_heap() -> None:
    """Return the free pages of every malloc arena to the OS (glibc `malloc_trim`)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
