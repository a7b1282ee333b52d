"""Benchmark of a sandboxed tool call: `call_p50_us_sandboxed`, measured through `SandboxPool`.

The env bench calls `bench_sandboxed_calls()`; `python -m arena.sandbox.bench` prints the same
JSON. One call = the whole round trip the runtime pays: pickle the job with the database image,
pipe it to a warm worker, deserialize, validate, run the tool, reply, parse.

What keeping workers apart per environment costs is measured too: `worker_start_ms_p50`, the start
of one worker in its bubblewrap boundary (paid in the background, by a clean spare, whenever an
environment takes its first worker), and `first_call_us_new_env`, the first call of an
environment no worker has served yet (a spare is bound and loads its tools.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import anyio

from arena.sandbox.models import SandboxLimits
from arena.sandbox.pool import SandboxPool
from arena.sandbox.process import WorkerProcess

DEFAULT_ENV = Path(__file__).resolve().parent.parent / "env" / "bundled" / "food_delivery"
DEFAULT_TOOL = "list_addresses"


def env_image(env_dir: Path) -> bytes:
    """The seeded database of an environment folder, serialized."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript((env_dir / "schema.sql").read_text() + "\n" + (env_dir / "seed.sql").read_text())
        return conn.serialize()
    finally:
        conn.close()


def _percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


async def bench_sandboxed_calls(
    env_dir: Path = DEFAULT_ENV,
    *,
    tool: str = DEFAULT_TOOL,
    arguments: dict[str, Any] | None = None,
    calls: int = 500,
    warmup: int = 20,
    pool: SandboxPool | None = None,
) -> dict[str, Any]:
    """Sequential sandboxed calls of one tool; returns latency percentiles in microseconds.

    Uses `pool` if given (so a caller can measure its own configuration), else a one-worker pool.
    """
    env_dir = Path(env_dir)
    image = env_image(env_dir)
    now = tomllib.loads((env_dir / "env.toml").read_text()).get("now", "2025-01-01T00:00:00")
    args = arguments or {}

    async def first_call(p: SandboxPool) -> float:
        with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
            fresh = Path(tmp) / env_dir.name
            shutil.copytree(env_dir, fresh)
            await anyio.sleep(0.5)  # let the pool's spares finish starting, as between calls
            start = time.perf_counter_ns()
            await p.call_tool(fresh, image, now=now, user_id=1, id_counters={}, tool=tool, arguments=args)
            return (time.perf_counter_ns() - start) / 1000

    async def run(p: SandboxPool) -> dict[str, Any]:
        inner: list[float] = []
        total: list[float] = []
        for i in range(warmup + calls):
            start = time.perf_counter_ns()
            outcome = await p.call_tool(
                env_dir, image, now=now, user_id=1, id_counters={}, tool=tool, arguments=args
            )
            elapsed = (time.perf_counter_ns() - start) / 1000
            if not outcome.ok:
                raise RuntimeError(f"benchmark tool {tool} failed: {outcome.error}")
            if i >= warmup:
                total.append(elapsed)
                inner.append(outcome.duration_us)
            elif i == warmup - 1:
                # The first call bound a spare to the environment and a new spare is starting:
                # that start is `worker_start_ms_p50`, not part of a warm call's latency.
                await anyio.sleep(1.0)
        total.sort()
        return {
            "env": env_dir.name,
            "tool": tool,
            "calls": calls,
            "image_bytes": len(image),
            "call_p50_us_sandboxed": round(statistics.median(total), 1),
            "call_p90_us_sandboxed": round(_percentile(total, 0.9), 1),
            "call_p99_us_sandboxed": round(_percentile(total, 0.99), 1),
            "worker_p50_us": round(statistics.median(inner), 1),
            "first_call_us_new_env": round(await first_call(p), 1),
            "worker_start_ms_p50": round(await worker_start_ms(p.limits), 1),
            "kills": p.kills,
        }

    if pool is not None:
        return await run(pool)
    async with SandboxPool(SandboxLimits(), workers=1) as own:
        return await run(own)


async def worker_start_ms(limits: SandboxLimits, starts: int = 5) -> float:
    """Median milliseconds from spawning a worker to its "ready" (confined, modules imported)."""
    times = []
    for _ in range(starts):
        start = time.perf_counter_ns()
        worker = await WorkerProcess.spawn(limits)
        times.append((time.perf_counter_ns() - start) / 1e6)
        await worker.destroy()
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    """`python -m arena.sandbox.bench [--env DIR] [--tool NAME] [--args JSON] [--calls N]`."""
    parser = argparse.ArgumentParser(prog="python -m arena.sandbox.bench", description=__doc__)
    parser.add_argument("--env", type=Path, default=DEFAULT_ENV, help="environment folder")
    parser.add_argument("--tool", default=DEFAULT_TOOL, help="a tool of that environment")
    parser.add_argument("--args", default="{}", help="the tool's arguments as JSON")
    parser.add_argument("--calls", type=int, default=500)
    ns = parser.parse_args(argv)
    try:
        arguments = json.loads(ns.args)
    except ValueError as exc:
        print(f"bench: error: --args is not JSON: {exc}", file=sys.stderr)
        return 2
    if not (ns.env / "tools.py").is_file():
        print(f"bench: error: {ns.env} is not an executable environment folder", file=sys.stderr)
        return 2
    result = anyio.run(
        lambda: bench_sandboxed_calls(ns.env, tool=ns.tool, arguments=arguments, calls=ns.calls)
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
