"""The boundary's probe, and the refusal to start without a boundary (never a weaker mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.sandbox import SandboxPool, SandboxStartError, boundary


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """Probe again under this test's environment, and again after it."""
    boundary.probe.cache_clear()
    yield
    boundary.probe.cache_clear()


def test_the_boundary_can_be_created_here(fresh_probe: None) -> None:
    found = boundary.probe()
    assert found.available, found.detail
    assert found.user_namespace == (os.geteuid() != 0)
    assert found.detail.startswith("bubblewrap: ")


@pytest.mark.anyio
async def test_without_bubblewrap_no_worker_starts(
    fresh_probe: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARENA_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(SandboxStartError, match=r"bubblewrap \(bwrap\) is not installed"):
        async with SandboxPool(workers=1):
            pass


@pytest.fixture
def refusing_bwrap(tmp_path: Path) -> Path:
    """What bubblewrap answers where the kernel or a unit's RestrictNamespaces= forbids namespaces."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    tmp_path.chmod(0o755)
    return fake


@pytest.mark.anyio
async def test_forbidden_namespaces_are_reported(
    fresh_probe: None, monkeypatch: pytest.MonkeyPatch, refusing_bwrap: Path
) -> None:
    monkeypatch.setenv("ARENA_BWRAP", str(refusing_bwrap))
    found = boundary.probe()
    assert not found.available
    assert "No permissions to create new namespace" in found.detail
    with pytest.raises(SandboxStartError, match="cannot create the sandbox boundary"):
        async with SandboxPool(workers=1):
            pass


def test_the_command_binds_only_what_the_worker_reads() -> None:
    argv, binds = boundary.command(["python"], disk_mb=8, bwrap="bwrap", user_namespace=True)
    ro = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--ro-bind"]
    assert ro == binds and str(boundary.ARENA_DIR) in binds
    assert str(boundary.ARENA_DIR.parent) not in binds  # the checkout (and its var/ store) is not
    assert not any(b in ("/", "/home", "/root", "/tmp", "/proc", "/run", "/var") for b in binds)
    assert argv[argv.index("--size") + 1] == str(8 << 20)
    assert argv[-2:] == ["--", "python"] and "--unshare-net" in argv and "--unshare-pid" in argv


def test_address_space_is_measured_without_proc() -> None:
    code = (
        "from arena.sandbox.confine import address_space_bytes\n"
        "measured = address_space_bytes()\n"
        "vm = next(int(l.split()[1]) * 1024 for l in open('/proc/self/status') if l.startswith('VmSize:'))\n"
        "print(measured, vm)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    measured, vm = map(int, out.split())
    assert abs(measured - vm) < 4 << 20, (measured, vm)
