"""Faults and load inside `arena bench soak`: sandbox workers SIGKILLed mid-call, the database
server restarted mid-phase (by a command the operator names), each on a schedule, and `/metrics` +
`/status` scraped at a steady rate by a loopback client in a process of its own
(`ops.admin_load_client`) while rounds run.

Each is driven from the real daemon's process, is bounded (one fault per scheduled round; load:
`rate × seconds` requests at most) and reports what it did, so the soak can check that the daemon
recovered by itself and lost or duplicated nothing.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import anyio
import structlog
from pydantic import BaseModel, Field

from arena.sandbox.proctree import busy_sandbox_worker, descendants, process_table
from ops.admin_load_client import ScrapeResult

log = structlog.get_logger(__name__)


async def due_evaluate(daemon: Any, every: int, done: Collection[int]) -> int:
    """Wait for EVALUATE of a round that is a multiple of `every` and not in `done`; that round."""
    while True:
        await anyio.sleep(0.01)
        rnd = daemon.round
        if rnd is not None and rnd % every == 0 and rnd not in done and daemon.phase == "evaluate":
            return rnd


class WorkerKiller:
    """SIGKILL one busy sandbox worker in EVALUATE of every `every`-th round."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.kills: dict[int, int] = {}

    async def run(self, daemon: Any) -> None:
        """Watch the daemon's rounds until cancelled."""
        while True:
            rnd = await due_evaluate(daemon, self.every, self.kills)
            pid = busy_sandbox_worker()
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                self.kills[rnd] = pid
                log.info("soak.worker_killed", round=rnd, pid=pid)


def adopted_processes() -> set[int]:
    """Live processes this one adopted as a child subreaper, sandboxes' own processes left out."""
    me = os.getpid()
    out = set()
    for row in descendants(process_table(), me):
        if row.ppid != me or row.state == "Z":
            continue
        try:
            cmdline = Path(f"/proc/{row.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"bwrap" not in cmdline and b"arena.sandbox" not in cmdline:
            out.add(row.pid)
    return out


RESTART_TIMEOUT_S = 300  # a restart command that never returns fails the soak instead of hanging it


class DatabaseRestarts(BaseModel):
    """The database server restarted in the middle of a phase, on a schedule."""

    every: int = 0
    command: list[str] = Field(default_factory=list)
    restarted: list[int] = Field(default_factory=list, description="Rounds the server was restarted in.")
    seconds: dict[int, float] = Field(default_factory=dict, description="Round -> how long the restart took.")


class DatabaseRestarter:
    """Run `command` (one that restarts the store's database server and returns once it is back)
    in EVALUATE of every `every`-th round, while the phase's transactions are in flight."""

    def __init__(self, every: int, command: list[str]) -> None:
        if every < 1 or not command:
            raise ValueError("a database restart needs a schedule (every N >= 1 rounds) and a command")
        self.report = DatabaseRestarts(every=every, command=command)

    async def run(self, daemon: Any) -> None:
        """Watch the daemon's rounds until cancelled."""
        while True:
            rnd = await due_evaluate(daemon, self.report.every, self.report.restarted)
            started = time.monotonic()
            before = adopted_processes()
            self.report.restarted.append(rnd)  # now: the round may end before the restart does
            # Output to a file, not a pipe: a server the command starts may keep its output open
            # for as long as it runs, and reading a pipe to its end would wait for that.
            with tempfile.TemporaryFile() as output, anyio.fail_after(RESTART_TIMEOUT_S):
                done = await anyio.run_process(
                    self.report.command, check=False, start_new_session=True, stdout=output, stderr=output
                )
                output.seek(0)
                said = output.read()[-2000:].decode(errors="replace")
            # The server the command started outlives it and is adopted by the soak (a child
            # subreaper): it is the database's, not a process the daemon leaked.
            server = adopted_processes() - before
            daemon.foreign_processes |= server
            daemon.database_server_pids |= server
            if done.returncode != 0:
                raise RuntimeError(f"the database restart command failed ({done.returncode}): {said}")
            self.report.seconds[rnd] = round(time.monotonic() - started, 3)
            log.info("soak.database_restarted", round=rnd, seconds=self.report.seconds[rnd])


class EndpointLoad(BaseModel):
    """Latencies of one endpoint under load, in milliseconds."""

    requests: int = 0
    errors: int = 0
    dropped: int = Field(0, description="Requests not sent: the client already had the most in flight.")
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None


class AdminLoadReport(BaseModel):
    """What the loopback client saw, and the rounds it ran beside."""

    rate: float
    seconds: float
    endpoints: dict[str, EndpointLoad] = Field(default_factory=dict)
    rounds_loaded: list[int] = Field(default_factory=list)
    round_seconds_loaded: float | None = None
    round_seconds_unloaded: float | None = None
    slowdown_pct: float | None = None
    client_cpu_seconds: float | None = Field(None, description="CPU the load client used (its own process).")


class AdminLoad:
    """`/metrics` and `/status` in turn at `rate` requests/s for `seconds`, from round `start_round`,
    sent by `ops.admin_load_client` in a process of its own."""

    def __init__(self, rate: float, seconds: float, start_round: int) -> None:
        self.rate, self.seconds, self.start_round = rate, seconds, start_round
        self.result = ScrapeResult()

    async def run(self, daemon: Any) -> None:
        """Wait for the start round, then run the client process to its end (a process, as a
        scraper is: in the daemon's process it would share the interpreter lock with the rounds)."""
        while daemon.round is None or daemon.round < self.start_round or daemon.admin is None:  # noqa: ASYNC110
            await anyio.sleep(0.05)
        command = [
            "nice",
            "-n",
            "19",
            sys.executable,
            "-m",
            "ops.admin_load_client",
            "--base",
            f"http://127.0.0.1:{daemon.admin.port}",
        ]
        command += ["--rate", str(self.rate), "--seconds", str(self.seconds)]
        # A session of its own, as every process the soak starts: the orphan count tells those apart.
        done = await anyio.run_process(command, check=False, start_new_session=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"admin load client failed ({done.returncode}): {done.stderr.decode()[-2000:]}"
            )
        self.result = ScrapeResult.model_validate_json(done.stdout)

    def report(self, round_windows: dict[int, tuple[float, float]]) -> AdminLoadReport:
        """The latencies, and the mean time of the rounds run wholly under load against the others."""
        out = AdminLoadReport(
            rate=self.rate, seconds=self.seconds, client_cpu_seconds=self.result.cpu_seconds
        )
        for path, values in self.result.latencies_ms.items():
            ordered = sorted(values)
            out.endpoints[path] = EndpointLoad(
                requests=len(values),
                errors=self.result.errors[path],
                dropped=self.result.dropped[path],
                p50_ms=round(ordered[len(ordered) // 2], 2) if ordered else None,
                p99_ms=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2)
                if ordered
                else None,
                max_ms=round(ordered[-1], 2) if ordered else None,
            )
        if self.result.window is None:
            return out
        low, high = self.result.window
        loaded = {r: b - a for r, (a, b) in round_windows.items() if a >= low and b <= high}
        unloaded = {r: b - a for r, (a, b) in round_windows.items() if b < low or a > high}
        out.rounds_loaded = sorted(loaded)
        if loaded and unloaded:
            out.round_seconds_loaded = round(statistics.median(loaded.values()), 4)
            out.round_seconds_unloaded = round(statistics.median(unloaded.values()), 4)
            out.slowdown_pct = round(100 * (out.round_seconds_loaded / out.round_seconds_unloaded - 1), 2)
        return out
