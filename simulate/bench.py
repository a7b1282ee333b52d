"""`arena bench model`: throughput of the local backend at several concurrency levels.

Each level sends `concurrency` simultaneous greedy requests (distinct prompts asking for long
answers, `new_tokens` each) and reports completion tokens per second of wall time, latency
percentiles and how the requests were batched. The target on a 2-core CPU: 32 concurrent requests
reach at least 5× the single-request throughput.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio
from pydantic import BaseModel

from arena.types import Message, SamplingParams
from simulate.local import LocalChatModel

TARGET_SPEEDUP = 5.0

_TOPICS = [
    "the history of the bicycle",
    "how bees make honey",
    "a day in a lighthouse",
    "the water cycle",
    "learning to cook rice",
    "a train journey through mountains",
    "how volcanoes form",
    "a city at night",
    "the life of a tree",
    "why the sky is blue",
    "an old library",
    "building a sandcastle",
    "the moon landing",
    "a rainy afternoon",
    "how bread rises",
    "a walk in the forest",
]


def bench_prompt(i: int) -> list[Message]:
    """A distinct prompt that invites a long answer (so rows rarely stop before `new_tokens`)."""
    topic = _TOPICS[i % len(_TOPICS)]
    return [Message(role="user", content=f"Write a long, detailed essay about {topic}. (#{i})")]


class LevelResult(BaseModel):
    """One concurrency level."""

    concurrency: int
    requests: int
    completion_tokens: int
    wall_s: float
    tokens_per_s: float
    latency_p50_s: float
    latency_max_s: float
    batches: int


class BenchReport(BaseModel):
    """The whole benchmark."""

    model: str
    device: str
    new_tokens: int
    levels: list[LevelResult]
    speedup: float  # tokens/s at the highest level over tokens/s at the lowest
    target_speedup: float = TARGET_SPEEDUP
    target_met: bool


async def _level(model: LocalChatModel, concurrency: int, new_tokens: int) -> LevelResult:
    params = SamplingParams(temperature=0.0, max_tokens=new_tokens)
    latencies: list[float] = []
    tokens = 0
    batches_before = model.batcher.batches_run

    async def one(i: int) -> None:
        nonlocal tokens
        started = time.perf_counter()
        completion = await model.chat(bench_prompt(i), params=params)
        latencies.append(time.perf_counter() - started)
        tokens += len(completion.completion_token_ids or [])

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(concurrency):
            tg.start_soon(one, i)
    wall = time.perf_counter() - started
    latencies.sort()
    return LevelResult(
        concurrency=concurrency,
        requests=concurrency,
        completion_tokens=tokens,
        wall_s=round(wall, 3),
        tokens_per_s=round(tokens / wall, 2),
        latency_p50_s=round(latencies[len(latencies) // 2], 3),
        latency_max_s=round(latencies[-1], 3),
        batches=model.batcher.batches_run - batches_before,
    )


async def bench_local(
    model: LocalChatModel, *, concurrency: Sequence[int] = (1, 8, 32), new_tokens: int = 64
) -> BenchReport:
    """Run the levels in order (after a short warm-up) and compare the extremes."""
    await model.chat(bench_prompt(0), params=SamplingParams(max_tokens=2))
    levels = [await _level(model, c, new_tokens) for c in concurrency]
    low = min(levels, key=lambda r: r.concurrency)
    high = max(levels, key=lambda r: r.concurrency)
    speedup = round(high.tokens_per_s / low.tokens_per_s, 2) if low.tokens_per_s else 0.0
    return BenchReport(
        model=model.name,
        device=str(model.model.device),
        new_tokens=new_tokens,
        levels=levels,
        speedup=speedup,
        target_met=speedup >= TARGET_SPEEDUP,
    )
