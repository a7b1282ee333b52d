"""Fixtures of the work layer's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Episodes run on asyncio (the local model backend and the sandbox pool need it)."""
    return "asyncio"
