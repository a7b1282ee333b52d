"""Fixtures for the environment tests: the fixture folders and loaded fixture environments."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from arena.env.loader import load_environment
from arena.env.runtime import Environment

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOOD = FIXTURES / "good"
BROKEN = FIXTURES / "broken"


@pytest.fixture(scope="session")
def shop() -> Environment:
    """The fixture shop environment (loaded once; the loader caches it by version anyway)."""
    return load_environment(GOOD / "shop")


@pytest.fixture
def env_copy(tmp_path: Path) -> Callable[[str], Path]:
    """Copy a fixture folder (`good/NAME` or `broken/NAME`) into tmp_path, to mutate it."""

    def make(name: str) -> Path:
        src = FIXTURES / name
        dst = tmp_path / Path(name).name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        return dst

    return make
