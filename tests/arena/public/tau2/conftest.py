"""Fixtures of the τ² tests: the mini domain (a checkout-shaped folder written here, in τ²'s retail
shape, whose tools the retail port runs), imported."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

MINI = Path(__file__).resolve().parent / "mini"


@pytest.fixture
def mini_checkout(tmp_path: Path) -> Path:
    """A copy of the mini checkout the test may change."""
    target = tmp_path / "tau2-bench"
    shutil.copytree(MINI, target)
    return target


@pytest.fixture(scope="session")
def mini_domain(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The mini retail domain, imported (read only)."""
    from arena.public.tau2.importer import import_tau2
    from arena.public.tau2.model import load_domain_folder

    folder = tmp_path_factory.mktemp("tau2") / "retail"
    import_tau2(MINI, "retail", folder)
    return load_domain_folder(folder)
