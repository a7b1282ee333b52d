"""The pinned `bfcl-eval` wheel for the tests, fetched from PyPI once into a cache.

Arena never downloads BFCL itself: the user supplies the distribution. The test set-up plays that
user: `pip download --no-deps bfcl-eval==<pin>` into `var/bfcl/<pin>` (or `$ARENA_TEST_BFCL_CACHE`),
like the MCP import test installs `mcp-server-git`. The side environment for BFCL's own checker is
a `pip install --no-deps --target` folder of the same wheel plus `mpmath` (its one dependency the
multi-turn checker imports); it never enters Arena's venv. A file lock keeps two pytest-xdist
workers from fetching at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

BFCL_VERSION = "2026.3.23"
MPMATH_VERSION = "1.3.0"
CACHE = Path(os.environ.get("ARENA_TEST_BFCL_CACHE", Path(__file__).resolve().parent.parent / "var" / "bfcl"))


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stderr[-2000:]}"


def wheel() -> Path:
    """The pinned bfcl-eval wheel (downloaded on first use)."""
    folder = CACHE / BFCL_VERSION
    path = folder / f"bfcl_eval-{BFCL_VERSION}-py3-none-any.whl"
    with _locked(folder):
        if not path.is_file():
            _pip("download", "--no-deps", f"bfcl-eval=={BFCL_VERSION}", "-d", str(folder))
    assert path.is_file(), f"pip download left no {path.name} in {folder}"
    return path


def side_environment() -> Path:
    """A folder holding bfcl-eval (no dependencies) and mpmath: BFCL's checker runs from it alone."""
    folder = CACHE / BFCL_VERSION / "side"
    source = wheel()  # before the lock below: the same lock file guards both
    with _locked(folder.parent):
        if not (folder / "bfcl_eval").is_dir() or not (folder / "mpmath").is_dir():
            _pip("install", "--no-deps", "--target", str(folder), str(source), f"mpmath=={MPMATH_VERSION}")
    return folder
