"""`arena bench env`: how fast environments reset, call tools and verify, and what instances cost.

Targets on a 2-core machine: reset p50 ≤ 300 µs, in-process call p50 ≤ 100 µs, sandboxed call
p50 ≤ 2 ms, 1,000 live instances ≤ 1 GB RSS. Each measurement is a short loop (a few seconds per
environment in all) and reports percentiles in microseconds; nothing here asserts, the numbers are
printed and judged by whoever runs it.
"""

from __future__ import annotations

import gc
import os
import resource
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from arena.env.errors import EnvLoadError
from arena.env.instance import ExecutableInstance, ToolSandbox
from arena.env.runtime import Environment
from arena.env.spec import TestCase
from arena.env.state import user_tables

TARGETS = {
    "reset_p50_us": 300.0,
    "call_p50_us": 100.0,
    "call_p50_us_sandboxed": 2000.0,
    "instances_1000_rss_mb": 1024.0,
}


class EnvBench(BaseModel):
    """One environment's numbers (microseconds)."""

    env: str
    reset_p50_us: float
    reset_p99_us: float
    call_p50_us: float
    call_p99_us: float
    call_tool: str
    call_p50_us_sandboxed: float | None = None
    verify_p50_us: float
    verify_method: str
    template_kb: float


class BenchReport(BaseModel):
    """Everything `arena bench env --json` prints."""

    environments: list[EnvBench]
    instances_1000_rss_mb: float
    instances_1000_rss_delta_mb: float
    instances_env: str
    targets: dict[str, float] = TARGETS
    notes: list[str] = []


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank; 0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return round(ordered[rank], 2)


def _time_us(fn: Callable[[], Any]) -> float:
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1000.0


def rss_mb() -> float:
    """The process's current resident set size in MB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def template_kb(env: Environment) -> float:
    """Size of the environment's template database."""
    assert env.template is not None
    pages = env.template.execute("PRAGMA page_count").fetchone()[0]
    size = env.template.execute("PRAGMA page_size").fetchone()[0]
    return round(pages * size / 1024, 1)


def pick_call(env: Environment) -> TestCase:
    """The call to time: a read-only tool's successful case (repeatable on one instance)."""
    reads = [c for c in env.tests if c.tool in env.tools and not env.tools[c.tool].writes]
    for case in reads:
        if not case.expect_error:
            with env.new_instance() as inst:
                if inst.call_sync(case.tool, case.args).ok:
                    return case
    if reads:
        return reads[0]
    return env.tests[0] if env.tests else TestCase(tool=next(iter(env.tools)))


def pick_write(env: Environment) -> TestCase | None:
    """A successful write call, so that verification has a non-empty diff to compute."""
    for case in env.tests:
        td = env.tools.get(case.tool)
        if td is not None and td.writes and not case.expect_error:
            return case
    return None


def bench_reset(env: Environment, n: int) -> list[float]:
    """Time `new_instance()` (the private copy of the template)."""
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        inst = env.new_instance()
        samples.append((time.perf_counter_ns() - start) / 1000.0)
        inst.close()
    return samples


def bench_call(env: Environment, case: TestCase, n: int) -> list[float]:
    """Time one in-process call (validation, the tool, the result), repeated on one instance."""
    with env.new_instance() as inst:
        inst.call_sync(case.tool, case.args)  # warm the statement cache, as an episode's later calls are
        return [_time_us(lambda: inst.call_sync(case.tool, case.args)) for _ in range(n)]


async def bench_call_sandboxed(env: Environment, case: TestCase, sandbox: ToolSandbox, n: int) -> list[float]:
    """Time one call through the sandbox pool (state image out, worker call, image back)."""
    inst = env.new_instance(sandbox=sandbox)
    try:
        await inst.call(case.tool, case.args)  # the worker's first import of tools.py is not a call
        samples = []
        for _ in range(n):
            start = time.perf_counter_ns()
            await inst.call(case.tool, case.args)
            samples.append((time.perf_counter_ns() - start) / 1000.0)
        return samples
    finally:
        await inst.aclose()


async def bench_verify(env: Environment, n: int) -> tuple[list[float], str]:
    """Time verification of an episode that wrote.

    With `arena.tasks` and a `tasks.toml`: the real `verify` of the first task without model or
    sandbox checks, on an instance where its reference calls were replayed. Otherwise a stand-in:
    snapshot + diff + one SQL check.
    """
    real = await _bench_real_verify(env, n)
    if real is not None:
        return real
    write = pick_write(env)
    sql = None
    if write is not None and write.sql_checks():
        sql = write.sql_checks()[0].sql
    if sql is None:
        assert env.template is not None
        table = user_tables(env.template)[0]
        sql = f'SELECT count(*) FROM "{table}"'
    samples = []
    for _ in range(n):
        with env.new_instance() as inst:
            if write is not None:
                inst.call_sync(write.tool, write.args)

            def verify(inst: ExecutableInstance = inst, sql: str = sql) -> None:
                final = inst.snapshot()
                inst.diff()
                final.execute(sql).fetchall()
                final.close()

            samples.append(_time_us(verify))
    return samples, "snapshot+diff+sql"


async def _bench_real_verify(env: Environment, n: int) -> tuple[list[float], str] | None:
    try:
        from arena.tasks.replay import reference_state
        from arena.tasks.toml_io import load_tasks
        from arena.tasks.transcript import ReplayTranscript
        from arena.tasks.verify import verify
    except ImportError:
        return None
    try:
        tasks = load_tasks(env.path, env.name, tools=env.tools)
    except EnvLoadError:
        return None
    for task in tasks:
        if any(c.kind in ("rubric", "python") for c in task.checks) or not task.reference:
            continue
        try:
            expected = await reference_state(env, task)
        except Exception:  # a task whose reference fails is the tasks checker's business, not ours
            continue
        transcript = ReplayTranscript(final_answer=task.answer or "")
        samples = []
        for _ in range(n):
            inst = env.new_instance()
            for call in task.reference:
                inst.call_sync(call.name, call.arguments)
            start = time.perf_counter_ns()
            await verify(task, inst, transcript, expected_state=expected)
            samples.append((time.perf_counter_ns() - start) / 1000.0)
            inst.close()
        kinds = "+".join(c.kind for c in task.checks)
        return samples, f"arena.tasks.verify ({task.id}: {kinds})"
    return None


async def bench_environment(env: Environment, *, iterations: int = 500) -> EnvBench:
    """Reset, in-process call and verification numbers for one executable environment."""
    case = pick_call(env)
    resets = bench_reset(env, iterations)
    calls = bench_call(env, case, iterations)
    verifies, method = await bench_verify(env, max(20, iterations // 5))
    return EnvBench(
        env=env.name,
        reset_p50_us=percentile(resets, 50),
        reset_p99_us=percentile(resets, 99),
        call_p50_us=percentile(calls, 50),
        call_p99_us=percentile(calls, 99),
        call_tool=case.tool,
        verify_p50_us=percentile(verifies, 50),
        verify_method=method,
        template_kb=template_kb(env),
    )


def bench_instances(env: Environment, count: int = 1000) -> tuple[float, float]:
    """(RSS, RSS growth) in MB with `count` live instances of `env` (each after one call)."""
    gc.collect()
    before = rss_mb()
    case = pick_call(env)
    live = []
    for _ in range(count):
        inst = env.new_instance()
        inst.call_sync(case.tool, case.args)  # a used instance: statement cache and pages touched
        live.append(inst)
    after = rss_mb()
    for inst in live:
        inst.close()
    return round(after, 1), round(after - before, 1)
