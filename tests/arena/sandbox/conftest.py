"""Fixtures of the sandbox tests: the mini_shop environment folder and its database image."""

from __future__ import annotations

import os
import shutil
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


ATTACK_TOOL = """

@tool
def attack(db: Db, arg: str) -> dict:
    \"\"\"Model-written code that attacks its sandbox.

    Args:
        arg: A JSON payload.
    \"\"\"
    import json

    p = json.loads(arg)
{body}
"""


def attack_env(root: Path, body: str, name: str = "attack_shop", module_code: str = "") -> Path:
    """A copy of mini_shop with a read tool `attack(arg)` running `body` (indented 4, sees `p`)."""
    env = root / name
    shutil.copytree(SHOP, env)
    code = (SHOP / "tools.py").read_text() + module_code + ATTACK_TOOL.format(body=body)
    (env / "tools.py").write_text(code)
    return env


def descendants(pid: int | None = None) -> set[int]:
    """Every process below `pid` (this one by default), however deep: sandboxes included."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as fh:
                    for line in fh:
                        if line.startswith("PPid:"):
                            parents[int(name)] = int(line.split()[1])
                            break
            except OSError:
                continue
    found: set[int] = set()
    for child in parents:
        node, seen = child, 0
        while node in parents and seen < 64:
            node, seen = parents[node], seen + 1
            if node == root:
                found.add(child)
                break
    return found


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def shop_image() -> bytes:
    return build_image()
