"""CLI output piped into a reader that stops early (`arena status | head`) ends quietly.

Each command runs as a subprocess whose stdout pipe is closed before it prints: every write then
fails with EPIPE, as it does once `head` has read its lines and exited.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ARENA = Path(sys.executable).with_name("arena")


def run_into_closed_pipe(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `arena ARGS` with a reader that has gone away; return its exit status and stderr."""
    proc = subprocess.Popen(
        [str(ARENA), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No ARENA_* settings from outside; a store of its own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    return clean | {"ARENA_DATA_DIR": str(tmp_path / "var")}


@pytest.mark.parametrize(
    "args",
    [
        ["config", "show"],
        ["curriculum", "show"],
        ["tasks", "replay", "hotels/cancel-harbor-view-june-20"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_commands_end_quietly_when_the_reader_goes_away(args: list[str], env: dict[str, str]) -> None:
    if args[0] == "curriculum":  # it reads the store: create an empty one
        subprocess.run([str(ARENA), "db", "upgrade"], env=env, check=True, capture_output=True)
    code, err = run_into_closed_pipe(args, env)
    assert err == "", err  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert code == 128 + signal.SIGPIPE


def test_status_ends_quietly_when_the_reader_goes_away(
    spawn_daemon, tmp_path: Path, env: dict[str, str]
) -> None:
    proc, base = spawn_daemon(tmp_path, FAKE_STEPS="100000", FAKE_DELAY="0.01")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        code, err = run_into_closed_pipe(["status", "--url", base], env)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert err == "", err
    assert code == 128 + signal.SIGPIPE
