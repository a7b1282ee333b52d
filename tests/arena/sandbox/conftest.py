"""Fixtures of the sandbox tests: the mini_shop environment folder and its database image."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SHOP = FIXTURES / "mini_shop"
NOW = "2025-06-01T09:00:00"


def build_image(env_dir: Path = SHOP) -> bytes:
    """schema.sql + seed.sql of an environment folder, as a serialized database."""
    conn = sqlite3.connect(":memory:")
    conn.executescript((env_dir / "schema.sql").read_text() + (env_dir / "seed.sql").read_text())
    image = conn.serialize()
    conn.close()
    return image


def query(image: bytes, sql: str) -> list[tuple]:
    """Rows of a query over a database image."""
    conn = sqlite3.connect(":memory:")
    conn.deserialize(image)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def shop_image() -> bytes:
    return build_image()
