"""Faults and load inside `arena bench soak`: sandbox workers SIGKILLed mid-call on a schedule, and
`/metrics` + `/status` scraped at a steady rate by a loopback client in a process of its own
(`ops.admin_load_client`) while rounds run.

Both are driven from the real daemon's process; each is bounded (kills: one per scheduled round;
load: `rate × seconds` requests at most) and reports what it did, so the soak can check that the
daemon recovered by itself and lost or duplicated nothing.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
from typing import Any

import anyio
import structlog
from pydantic import BaseModel, Field

from arena.sandbox.proctree import busy_sandbox_worker
from ops.admin_load_client import ScrapeResult

log = structlog.get_logger(__name__)


class WorkerKiller:
    """SIGKILL one busy sandbox worker in EVALUATE of every `every`-th round."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.kills: dict[int, int] = {}

    async def run(self, daemon: Any) -> None:
        """Watch the daemon's rounds until cancelled."""
        while True:
            await anyio.sleep(0.01)
            rnd = daemon.round
            if rnd is None or rnd % self.every or rnd in self.kills or daemon.phase != "evaluate":
                continue
            pid = busy_sandbox_worker()
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                self.kills[rnd] = pid
                log.info("soak.worker_killed", round=rnd, pid=pid)


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
