"""SIGTERM as a subprocess: graceful exit 0 at the next safe point, or at the end of the grace period."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest


def wait_for_phase(
    proc: subprocess.Popen[str], base: str, phase: str | None = None, timeout: float = 30
) -> dict:
    """Poll /status until a phase (`phase`, if given) is running and has made progress."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            status = httpx.get(f"{base}/status", timeout=1).json()
            running = status["phase"] is not None and (phase is None or status["phase"] == phase)
            if running and (phase is None or status["progress"]["done"] > 0):
                return status
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"daemon never reached phase {phase or 'any'}")


@pytest.mark.slow
def test_sigterm_drains_at_safe_point_and_exits_zero(tmp_path: Path, spawn_daemon) -> None:
    proc, base = spawn_daemon(
        tmp_path, ARENA_DAEMON__GRACE_PERIOD_S="10", FAKE_STEPS="100000", FAKE_DELAY="0.01"
    )
    # DIAGNOSE runs 100,000 safe points: the signal lands inside a phase, not between two.
    wait_for_phase(proc, base, phase="diagnose")
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=15)
    elapsed = time.monotonic() - sent
    assert proc.returncode == 0, out
    assert elapsed < 10, f"took {elapsed:.1f}s, grace period is 10s"
    assert '"event": "daemon.signal"' in out
    assert "phase.interrupted" in out
    assert "grace_period_expired" not in out


@pytest.mark.slow
def test_sigterm_cancels_work_after_grace_period(tmp_path: Path, spawn_daemon) -> None:
    proc, base = spawn_daemon(tmp_path, ARENA_DAEMON__GRACE_PERIOD_S="1", FAKE_STUBBORN="1")
    wait_for_phase(proc, base)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=15)
    elapsed = time.monotonic() - sent
    assert proc.returncode == 0, out
    assert 1 <= elapsed < 6, f"took {elapsed:.1f}s with a 1s grace period"
    assert "grace_period_expired" in out
