"""The admin-load scraper of `arena bench soak`, run as a process of its own:
`python -m ops.admin_load_client --base URL --rate RPS --seconds S` prints a `ScrapeResult` as JSON.

Why a process: a Prometheus server or an operator's `curl` scrapes from another process. A client
inside the daemon's process shares its interpreter lock, so its own Python (sending, parsing,
timing) would be counted against the API's latency and the rounds' time.

Why its own few lines of HTTP/1.1 instead of httpx: a load generator must cost the machine far less
than what it measures, and on the 2-core machine the rounds share, httpx's async client spent
about 1.3 ms of CPU a request (16 CPU-s for 12,000 requests), a quarter of a core at 200 requests a
second. The client only sends fixed GETs over kept-alive connections and reads `Content-Length`
bodies, which is all the admin API answers with.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

MAX_IN_FLIGHT = 32
PATHS = ("/metrics", "/status")
TIMEOUT_S = 5.0


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


class _Connection:
    """One kept-alive connection: a GET, then its status and `Content-Length` body."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def get(self, request: bytes) -> int:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        length = 0
        for line in header_lines:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        await self.reader.readexactly(length)
        return int(status_line.split()[1])

    def close(self) -> None:
        self.writer.close()


class Scraper:
    """`/metrics` and `/status` in turn at `rate` requests/s for `seconds` at most, `rate × seconds`
    requests at most, on a fixed schedule (never a burst)."""

    def __init__(self, base: str, rate: float, seconds: float) -> None:
        if rate <= 0 or seconds <= 0:
            raise ValueError(f"admin load needs a positive rate and duration, got {rate}/s for {seconds} s")
        url = urlsplit(base)
        if url.scheme != "http" or url.hostname is None or url.port is None:
            raise ValueError(f"admin load needs an http://HOST:PORT base URL, got {base!r}")
        self.host, self.port = url.hostname, url.port
        self.rate, self.seconds = rate, seconds
        self.requests = {p: f"GET {p} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode() for p in PATHS}
        self.result = ScrapeResult()
        self.in_flight = 0
        self.idle: list[_Connection] = []

    async def run(self) -> ScrapeResult:
        """Send the requests; the result once the last answered."""
        total = int(self.rate * self.seconds)
        tasks: set[asyncio.Task[None]] = set()
        begun = time.monotonic()
        try:
            for i in range(total):
                delay = begun + i / self.rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                if time.monotonic() - begun > self.seconds:
                    break  # bounded in time as in count: a slow server gets fewer requests
                path = PATHS[i % 2]
                if self.in_flight >= MAX_IN_FLIGHT:
                    self.result.dropped[path] += 1  # never a pile-up behind a stalled server
                    continue
                task = asyncio.create_task(self._one(path))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.wait(tasks)
        finally:  # the rounds may end first: the window is what ran
            self.result.window = (begun, time.monotonic())
            for connection in self.idle:
                connection.close()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            self.result.cpu_seconds = round(usage.ru_utime + usage.ru_stime, 3)
        return self.result

    async def _one(self, path: str) -> None:
        started = time.perf_counter()
        self.in_flight += 1
        try:
            async with asyncio.timeout(TIMEOUT_S):
                ok = await self._get(path)
        except TimeoutError:
            ok = False
        finally:
            self.in_flight -= 1
        self.result.latencies_ms[path].append((time.perf_counter() - started) * 1000)
        if not ok:
            self.result.errors[path] += 1

    async def _get(self, path: str) -> bool:
        """The GET on an idle connection, or on a new one when there is none or the server had
        closed the idle one (uvicorn closes a connection idle for 5 s, as HTTP clients expect)."""
        reused = bool(self.idle)
        while True:
            connection = self.idle.pop() if reused else None
            try:
                if connection is None:
                    connection = _Connection(*await self._connect())
                status = await connection.get(self.requests[path])
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
                if connection is not None:
                    connection.close()  # a connection in an unknown state is not reused
                if reused:
                    reused = False
                    continue
                return False
            self.idle.append(connection)
            return status == 200

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(self.host, self.port)


def main(argv: list[str] | None = None) -> int:
    """Scrape, then print the result as one JSON document."""
    parser = argparse.ArgumentParser(prog="python -m ops.admin_load_client", description=__doc__)
    parser.add_argument("--base", required=True, help="the admin API's base URL, http://HOST:PORT")
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--seconds", type=float, required=True, help="for at most this long")
    args = parser.parse_args(argv)
    try:
        scraper = Scraper(args.base, args.rate, args.seconds)
    except ValueError as exc:
        print(f"admin_load_client: {exc}", file=sys.stderr)
        return 2
    print(asyncio.run(scraper.run()).model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
