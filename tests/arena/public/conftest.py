"""Fixtures of the public-benchmark tests: the imported BFCL benchmark and BFCL's own side environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def bfcl(bfcl_folder: Path) -> Any:
    """The imported benchmark (`arena.public.bfcl.model.BfclBenchmark`)."""
    from arena.public.bfcl.model import load_benchmark

    return load_benchmark(bfcl_folder)


@pytest.fixture(scope="session")
def bfcl_side() -> Path:
    """bfcl-eval (no dependencies) and mpmath in a folder of their own, outside Arena's venv."""
    from tests.bfcl_dist import side_environment

    return side_environment()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
