"""Faults and load inside `arena bench soak`: sandbox workers SIGKILLed mid-call on a schedule, and
`/metrics` + `/status` scraped at a steady rate from a loopback client (on a thread with its own
event loop) while rounds run.

Both run beside the real daemon in its process; each is bounded (kills: one per scheduled round;
load: `rate × seconds` requests at most) and reports what it did, so the soak can check that the
daemon recovered by itself and lost or duplicated nothing.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from typing import Any

import anyio
import httpx
import structlog
from pydantic import BaseModel, Field

from arena.sandbox.proctree import busy_sandbox_worker

log = structlog.get_logger(__name__)
MAX_IN_FLIGHT = 32


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


class AdminLoad:
    """`/metrics` and `/status` in turn at `rate` requests/s for `seconds`, from round `start_round`;
    at most `MAX_IN_FLIGHT` at once (the others are counted as dropped)."""

    def __init__(self, rate: float, seconds: float, start_round: int) -> None:
        self.rate, self.seconds, self.start_round = rate, seconds, start_round
        self.latencies: dict[str, list[float]] = {"/metrics": [], "/status": []}
        self.errors: dict[str, int] = {"/metrics": 0, "/status": 0}
        self.dropped: dict[str, int] = {"/metrics": 0, "/status": 0}
        self.in_flight = 0
        self.window: tuple[float, float] | None = None

    async def run(self, daemon: Any) -> None:
        """Wait for the start round, then send the requests on a fixed schedule (never a burst)
        from a thread with its own event loop, as a scraper in another process would: on the
        daemon's loop the client would wait for the round's work, and the round for the client."""
        while daemon.round is None or daemon.round < self.start_round or daemon.admin is None:  # noqa: ASYNC110
            await anyio.sleep(0.05)
        await anyio.to_thread.run_sync(anyio.run, self._scrape, f"http://127.0.0.1:{daemon.admin.port}")

    async def _scrape(self, base: str) -> None:
        total = int(self.rate * self.seconds)
        limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
        begun = time.monotonic()
        try:
            async with (
                httpx.AsyncClient(base_url=base, timeout=5, limits=limits) as client,
                anyio.create_task_group() as tg,
            ):
                for i in range(total):
                    delay = begun + i / self.rate - time.monotonic()
                    if delay > 0:
                        await anyio.sleep(delay)
                    if time.monotonic() - begun > self.seconds:
                        break  # bounded in time as in count: a slow server gets fewer requests
                    path = "/metrics" if i % 2 == 0 else "/status"
                    if self.in_flight >= MAX_IN_FLIGHT:
                        self.dropped[path] += 1  # never a pile-up behind a stalled server
                        continue
                    tg.start_soon(self._one, client, path)
        finally:  # the rounds may end first: the window is what ran
            self.window = (begun, time.monotonic())

    async def _one(self, client: httpx.AsyncClient, path: str) -> None:
        started = time.perf_counter()
        self.in_flight += 1
        try:
            resp = await client.get(path)
            ok = resp.status_code == 200
        except httpx.HTTPError:
            ok = False
        finally:
            self.in_flight -= 1
        self.latencies[path].append((time.perf_counter() - started) * 1000)
        if not ok:
            self.errors[path] += 1

    def report(self, round_windows: dict[int, tuple[float, float]]) -> AdminLoadReport:
        """The latencies, and the mean time of the rounds run wholly under load against the others."""
        out = AdminLoadReport(rate=self.rate, seconds=self.seconds)
        for path, values in self.latencies.items():
            ordered = sorted(values)
            out.endpoints[path] = EndpointLoad(
                requests=len(values),
                errors=self.errors[path],
                dropped=self.dropped[path],
                p50_ms=round(ordered[len(ordered) // 2], 2) if ordered else None,
                p99_ms=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2)
                if ordered
                else None,
                max_ms=round(ordered[-1], 2) if ordered else None,
            )
        if self.window is None:
            return out
        low, high = self.window
        loaded = {r: b - a for r, (a, b) in round_windows.items() if a >= low and b <= high}
        unloaded = {r: b - a for r, (a, b) in round_windows.items() if b < low or a > high}
        out.rounds_loaded = sorted(loaded)
        if loaded and unloaded:
            out.round_seconds_loaded = round(statistics.median(loaded.values()), 4)
            out.round_seconds_unloaded = round(statistics.median(unloaded.values()), 4)
            out.slowdown_pct = round(100 * (out.round_seconds_loaded / out.round_seconds_unloaded - 1), 2)
        return out
