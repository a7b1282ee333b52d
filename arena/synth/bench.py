"""`arena bench synth`: graph-task synthesis throughput with the template writer, gates included.

Tasks per second counts kept tasks (every gate passed, the adversary gate included) over the wall
time of the whole run, graph building included; `warm_tasks_per_s` leaves out the first
(graph-building) pass. Rejections are counted per gate, and the adversary gate's outcome per
non-working agent (held / paid / n/a), per environment and in total.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from arena.difficulty import Difficulty
from arena.synth.graph import build_graph
from arena.synth.graph_tasks import synthesize_graph_tasks


class EnvBench(BaseModel):
    """One environment's numbers."""

    env: str
    kept: int
    attempts: int
    graph_s: float
    synth_s: float
    tasks_per_s: float
    rejections: dict[str, int] = {}
    adversaries: dict[str, dict[str, int]] = {}


class SynthBench(BaseModel):
    """The whole benchmark."""

    n_per_env: int
    envs: list[EnvBench]
    kept: int
    seconds: float
    tasks_per_s: float
    warm_tasks_per_s: float
    rejections: dict[str, int] = {}
    adversaries: dict[str, dict[str, int]] = {}


def _add(total: dict[str, int], part: dict[str, int]) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value


async def bench_synth(
    envs: list[Any], *, n: int = 50, seed: int = 0, difficulty: Difficulty | None = None
) -> SynthBench:
    """Synthesize `n` tasks per environment and time it."""
    results: list[EnvBench] = []
    start = time.perf_counter()
    for env in envs:
        t0 = time.perf_counter()
        graph = await build_graph(env)
        t1 = time.perf_counter()
        res = await synthesize_graph_tasks(env, n, seed=seed, difficulty=difficulty, graph=graph)
        t2 = time.perf_counter()
        results.append(
            EnvBench(
                env=env.name,
                kept=len(res.tasks),
                attempts=res.report.attempts,
                graph_s=round(t1 - t0, 4),
                synth_s=round(t2 - t1, 4),
                tasks_per_s=round(len(res.tasks) / max(t2 - t0, 1e-9), 2),
                rejections=res.report.rejections,
                adversaries=res.report.adversaries,
            )
        )
    seconds = time.perf_counter() - start
    kept = sum(r.kept for r in results)
    synth_s = sum(r.synth_s for r in results)
    rejections: dict[str, int] = {}
    adversaries: dict[str, dict[str, int]] = {}
    for r in results:
        _add(rejections, r.rejections)
        for agent, counts in r.adversaries.items():
            _add(adversaries.setdefault(agent, {}), counts)
    return SynthBench(
        n_per_env=n,
        envs=results,
        kept=kept,
        seconds=round(seconds, 3),
        tasks_per_s=round(kept / max(seconds, 1e-9), 2),
        warm_tasks_per_s=round(kept / max(synth_s, 1e-9), 2),
        rejections=rejections,
        adversaries=adversaries,
    )
