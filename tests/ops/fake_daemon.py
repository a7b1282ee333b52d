"""Trivial, fast phases for the daemon's control-flow tests, and a script that runs them.

Imported by the tests (through `conftest.load_fakes`) and run as a subprocess by the signal and
fault tests: `python fake_daemon.py` with the configuration in ARENA_* variables and the phase
sizes in FAKE_* variables.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

import anyio
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import TaskRow, repo
from ops.phases.base import PHASE_ORDER, BasePhase, PhaseContext
from ops.phases.episodes import run_work_items, store_tasks
from work.jobs import EpisodeResult, WorkItem


class StepPhase(BasePhase):
    """`steps` safe points with `delay` seconds between them; records each run in `calls`."""

    def __init__(
        self, name: str, steps: int = 3, delay: float = 0.01, calls: list[str] | None = None
    ) -> None:
        self.name = name
        self.steps = steps
        self.delay = delay
        self.calls = calls if calls is not None else []
        self.done_steps = 0

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        self.calls.append(self.name)
        for i in range(self.steps):
            await ctx.safe_point()
            await anyio.sleep(self.delay)
            self.done_steps += 1
            ctx.progress(i + 1, self.steps)
        return {"steps": self.steps, "round": ctx.round}

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        if self.name == "diagnose":  # exercise a phase writing its own table with its done mark
            await repo.save_diagnosis(session, ctx.round, "statistical", output)


class EpisodePhase(BasePhase):
    """Runs `tasks` x `samples` deterministic fake episodes through the real work-item runner."""

    name = "evaluate"

    def __init__(self, tasks: int = 4, samples: int = 2, delay: float = 0.01, calls: list[str] | None = None):
        self.tasks, self.samples, self.delay = tasks, samples, delay
        self.calls = calls if calls is not None else []

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        self.calls.append(self.name)
        rows = [
            TaskRow(id=f"fake/t{i}", env="fake", origin="manual", data={"i": i}) for i in range(self.tasks)
        ]
        await store_tasks(ctx, rows)
        items = [
            WorkItem(task_id=r.id, env="fake", sample_idx=s, task=r.data)
            for r in rows
            for s in range(self.samples)
        ]

        async def runner(item: WorkItem) -> EpisodeResult:
            await anyio.sleep(self.delay)
            key = f"{ctx.round}/{item.task_id}/{item.sample_idx}".encode()
            reward = hashlib.sha256(key).digest()[0] / 255
            return EpisodeResult(reward=reward, passed=reward > 0.5, transcript={"key": key.decode()})

        return await run_work_items(ctx, items, runner, purpose="eval", concurrency=2)


def fake_phases(
    *, steps: int = 3, delay: float = 0.01, tasks: int = 4, samples: int = 2, calls: list[str] | None = None
) -> list[Any]:
    """EVALUATE with fake episodes, then five step phases."""
    calls = calls if calls is not None else []
    return [
        EpisodePhase(tasks, samples, delay, calls),
        *(StepPhase(n, steps, delay, calls) for n in PHASE_ORDER[1:]),
    ]


def main() -> int:
    from ops.config import load_config
    from ops.daemon import Daemon
    from ops.logging import configure_logging

    config = load_config()
    configure_logging("info", "json")
    phases = fake_phases(
        steps=int(os.environ.get("FAKE_STEPS", "3")),
        delay=float(os.environ.get("FAKE_DELAY", "0.01")),
        tasks=int(os.environ.get("FAKE_TASKS", "4")),
        samples=int(os.environ.get("FAKE_SAMPLES", "2")),
    )
    if os.environ.get("FAKE_STUBBORN"):  # a phase that ignores safe points: only the grace timer ends it
        phases[0] = StubbornPhase()
    return anyio.run(Daemon(config, phases=phases).run)


class StubbornPhase(BasePhase):
    """Sleeps without safe points."""

    name = "evaluate"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        print("stubborn phase started", flush=True)
        await anyio.sleep(3600)
        return {}


if __name__ == "__main__":
    sys.exit(main())
