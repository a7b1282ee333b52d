"""Fixtures of the τ² tests: the mini domain (a checkout-shaped folder written here), imported, and
the port its tools run on (a stand-in always; the real retail port when it is installed)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

MINI = Path(__file__).resolve().parent / "mini"
FAKE_PORT = "tests.arena.public.tau2.fake_port"


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


@pytest.fixture(params=["stand-in", "retail"])
def port(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which port runs the mini domain's tools: the stand-in, or the real one when installed."""
    from arena.public.tau2 import domains

    if request.param == "retail":
        pytest.importorskip("arena.public.tau2.retail")
    else:
        monkeypatch.setitem(domains.PORTS, "retail", FAKE_PORT)
    return str(request.param)
