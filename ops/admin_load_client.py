"""The admin-load scraper of `arena bench soak`, run as a process of its own:
`python -m ops.admin_load_client --base URL --rate RPS --seconds S` prints a `ScrapeResult` as JSON.

Why a process: a Prometheus server or an operator's `curl` scrapes from another process. A client
inside the daemon's process shares its interpreter lock, so its own Python (sending, parsing,
timing) would be counted against the API's latency and the rounds' time.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import anyio
import httpx
from pydantic import BaseModel, Field

MAX_IN_FLIGHT = 32
PATHS = ("/metrics", "/status")


class ScrapeResult(BaseModel):
    """What the client saw: latencies (ms) and errors per path, requests it did not send because
    `MAX_IN_FLIGHT` were already waiting, and the window it ran in (`time.monotonic()`, which is
    the machine's monotonic clock, the same in every process)."""

    latencies_ms: dict[str, list[float]] = Field(default_factory=lambda: {p: [] for p in PATHS})
    errors: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(PATHS, 0))
    dropped: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(PATHS, 0))
    window: tuple[float, float] | None = None
    cpu_seconds: float = Field(
        0.0, description="The client's own CPU time: load on the machine the rounds share."
    )


class Scraper:
    """`/metrics` and `/status` in turn at `rate` requests/s for `seconds` at most, `rate × seconds`
    requests at most, on a fixed schedule (never a burst)."""

    def __init__(self, base: str, rate: float, seconds: float) -> None:
        if rate <= 0 or seconds <= 0:
            raise ValueError(f"admin load needs a positive rate and duration, got {rate}/s for {seconds} s")
        self.base, self.rate, self.seconds = base, rate, seconds
        self.result = ScrapeResult()
        self.in_flight = 0

    async def run(self) -> ScrapeResult:
        """Send the requests; the result once the last answered."""
        total = int(self.rate * self.seconds)
        limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
        begun = time.monotonic()
        try:
            async with (
                httpx.AsyncClient(base_url=self.base, timeout=5, limits=limits) as client,
                anyio.create_task_group() as tg,
            ):
                for i in range(total):
                    delay = begun + i / self.rate - time.monotonic()
                    if delay > 0:
                        await anyio.sleep(delay)
                    if time.monotonic() - begun > self.seconds:
                        break  # bounded in time as in count: a slow server gets fewer requests
                    path = PATHS[i % 2]
                    if self.in_flight >= MAX_IN_FLIGHT:
                        self.result.dropped[path] += 1  # never a pile-up behind a stalled server
                        continue
                    tg.start_soon(self._one, client, path)
        finally:  # the rounds may end first: the window is what ran
            self.result.window = (begun, time.monotonic())
            usage = resource.getrusage(resource.RUSAGE_SELF)
            self.result.cpu_seconds = round(usage.ru_utime + usage.ru_stime, 3)
        return self.result

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
        self.result.latencies_ms[path].append((time.perf_counter() - started) * 1000)
        if not ok:
            self.result.errors[path] += 1


def main(argv: list[str] | None = None) -> int:
    """Scrape, then print the result as one JSON document."""
    parser = argparse.ArgumentParser(prog="python -m ops.admin_load_client", description=__doc__)
    parser.add_argument("--base", required=True, help="the admin API's base URL")
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--seconds", type=float, required=True, help="for at most this long")
    args = parser.parse_args(argv)
    try:
        scraper = Scraper(args.base, args.rate, args.seconds)
    except ValueError as exc:
        print(f"admin_load_client: {exc}", file=sys.stderr)
        return 2
    print(anyio.run(scraper.run).model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
