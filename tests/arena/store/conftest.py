"""The store's tests run on asyncio (the daemon's loop), on SQLite and, where marked, PostgreSQL."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
