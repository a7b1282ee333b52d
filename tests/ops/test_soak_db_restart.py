"""`arena bench soak --restart-database-every N`: PostgreSQL restarted in the middle of EVALUATE,
again and again, and the daemon goes on by itself with nothing lost or duplicated.

The restart is real: a PostgreSQL cluster of the test's own (initdb in a scratch folder, its own
port), so restarting it disturbs no other test that uses the shared server.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.cli import main

PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
SERVICE_USER = "postgres"  # PostgreSQL refuses to run as root


def _as_server_user(*argv: str) -> list[str]:
    return ["runuser", "-u", SERVICE_USER, "--", *argv] if os.geteuid() == 0 else list(argv)


@pytest.fixture
def private_cluster() -> Iterator[tuple[str, str]]:
    """A scratch PostgreSQL cluster: its database URL and the command that restarts it."""
    if not PG_BINS:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    bin_dir = PG_BINS[-1]
    folder = Path(tempfile.mkdtemp(prefix="arena-pg-", dir="/var/tmp"))
    folder.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(folder, SERVICE_USER)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = folder / "data"
    pg_ctl = str(bin_dir / "pg_ctl")
    subprocess.run(_as_server_user(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-N"),
                   check=True, capture_output=True)  # fmt: skip
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = [pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"]
    subprocess.run(_as_server_user(*start), check=True, capture_output=True)
    try:
        # pg_ctl restart starts the server again with the options it was started with.
        restart = shlex.join(_as_server_user(pg_ctl, "-D", str(data), "-m", "fast", "-w", "restart"))
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres", restart
    finally:
        subprocess.run(
            _as_server_user(pg_ctl, "-D", str(data), "-m", "immediate", "stop"), capture_output=True
        )
        shutil.rmtree(folder, ignore_errors=True)


def test_postgres_restarted_mid_phase_loses_nothing(
    private_cluster: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, restart = private_cluster
    args = ["--rounds", "4", "--tasks", "2", "--samples", "2", "--keep-rounds", "2", "--database-url", url]
    faults = ["--restart-database-every", "2", "--restart-database-command", restart]
    code = main(["bench", "soak", "--json", *args, *faults])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"], report
    assert sorted(report["database_restarts"]["seconds"]) == ["2", "4"]
    assert [s["round"] for s in report["samples"]] == [1, 2, 3, 4]
    assert report["episodes_lost"] == report["episodes_duplicated"] == 0 and report["stalled"] is None
    # The restarted server is the database's, not a process the daemon left behind.
    assert report["orphans_during"] == report["orphans_after"] == 0 and report["children_after"] == 0
    assert all(s["integrity_problems"] == [] for s in report["samples"])


def test_a_restart_needs_postgres_and_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "soak", "--rounds", "1", "--restart-database-every", "2"]) == 2
    assert "go together" in capsys.readouterr().err
    code = main(
        [
            "bench",
            "soak",
            "--rounds",
            "1",
            "--restart-database-every",
            "2",
            "--restart-database-command",
            "true",
        ]
    )
    assert code == 2 and "needs a PostgreSQL store" in capsys.readouterr().err
