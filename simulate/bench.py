"""`arena bench model`: the local engine's throughput, side by side with llama.cpp on the same model.

Each concurrency level sends `concurrency` simultaneous greedy requests (distinct prompts asking
for long answers, `new_tokens` each) and reports completion tokens per second of wall time, the
time per generated token a request saw, latency percentiles and how the requests were batched.
The engine runs once per precision (and, with `--transformers`, once more per precision decoding
every token through transformers' forward, the path before `simulate.fast_decode`); llama.cpp
runs the same prompts' token ids when it is installed (`simulate.bench_llamacpp`); a GRPO-shaped
rollout workload gives episodes per hour (`simulate.bench_rollouts`).

The targets on the 2-core CPU: a single stream at least half of llama.cpp's tokens/s in the same
run, and 32 concurrent requests at least 600 tokens/s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import anyio
from pydantic import BaseModel

from arena.types import Completion, Message, SamplingParams
from simulate.batching import DynamicBatcher

SINGLE_STREAM_SHARE = 0.5  # of llama.cpp's single-stream tokens/s
CONCURRENT_TARGET = 600.0  # tokens/s at 32 concurrent requests
CONCURRENT_LEVEL = 32

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


class Chat(Protocol):
    """What a level needs of an engine: one completion of a prompt."""

    async def chat(self, messages: list[Message], *, params: SamplingParams | None = None) -> Completion: ...


class LevelResult(BaseModel):
    """One concurrency level."""

    concurrency: int
    requests: int
    completion_tokens: int
    wall_s: float
    tokens_per_s: float
    ms_per_token: float  # a request's median latency over its tokens: what one caller waits a token
    latency_p50_s: float
    latency_max_s: float
    batches: int | None = None  # decode batches the engine ran (None where it does not batch)


class EngineRun(BaseModel):
    """One engine in one precision over every level."""

    engine: str  # "arena" or "llama.cpp"
    precision: str  # float32 / bfloat16, or the GGUF's quantization
    decode: str  # "fast" (simulate.fast_decode), "transformers", or "llama.cpp"
    levels: list[LevelResult]

    def at(self, concurrency: int) -> LevelResult | None:
        """The level with this concurrency, if it ran."""
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)


class RolloutRun(BaseModel):
    """GRPO-shaped rollouts: groups of samples of one tool prompt, several turns each."""

    precision: str
    groups: int
    group_size: int
    turns: int
    turn_tokens: int
    prompt_tokens: int  # the first turn's prompt (tools and task)
    episodes: int
    completion_tokens: int
    wall_s: float
    episodes_per_hour: float
    tokens_per_s: float


class ModelBenchReport(BaseModel):
    """The whole benchmark, with the targets' verdicts."""

    model: str
    device: str
    new_tokens: int
    runs: list[EngineRun]
    rollouts: list[RolloutRun]
    llama_cpp: str | None  # why llama.cpp did not run, or None when it did
    single_stream_share: float | None  # the best Arena single stream over llama.cpp's
    single_stream_target: float = SINGLE_STREAM_SHARE
    concurrent_tokens_per_s: float | None  # the best Arena figure at 32 concurrent requests
    concurrent_target: float = CONCURRENT_TARGET
    single_stream_met: bool | None
    concurrent_met: bool | None


async def run_level(
    engine: Chat, concurrency: int, new_tokens: int, batches: DynamicBatcher[Any, Any] | None = None
) -> LevelResult:
    """`concurrency` simultaneous greedy requests of `new_tokens` each; `batches` is the engine's
    batcher, whose count of batches the level reports."""
    params = SamplingParams(temperature=0.0, max_tokens=new_tokens)
    latencies: list[float] = []
    counts: list[int] = []
    before = batches.batches_run if batches is not None else 0

    async def one(i: int) -> None:
        started = time.perf_counter()
        completion = await engine.chat(bench_prompt(i), params=params)
        latencies.append(time.perf_counter() - started)
        counts.append(len(completion.completion_token_ids or []))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(concurrency):
            tg.start_soon(one, i)
    wall = time.perf_counter() - started
    tokens = sum(counts)
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    per_request = tokens / len(counts) if counts else 0
    return LevelResult(
        concurrency=concurrency,
        requests=concurrency,
        completion_tokens=tokens,
        wall_s=round(wall, 3),
        tokens_per_s=round(tokens / wall, 2),
        ms_per_token=round(1000 * p50 / per_request, 2) if per_request else 0.0,
        latency_p50_s=round(p50, 3),
        latency_max_s=round(latencies[-1], 3),
        batches=batches.batches_run - before if batches is not None else None,
    )


async def run_levels(
    engine: Chat, concurrency: Sequence[int], new_tokens: int, batches: DynamicBatcher[Any, Any] | None = None
) -> list[LevelResult]:
    """Every level in order, after a short warm-up request (weights packed, caches allocated)."""
    await engine.chat(bench_prompt(0), params=SamplingParams(max_tokens=2))
    return [await run_level(engine, c, new_tokens, batches) for c in concurrency]


def verdicts(
    model: str,
    device: str,
    new_tokens: int,
    runs: list[EngineRun],
    rollouts: list[RolloutRun],
    llama_cpp: str | None,
) -> ModelBenchReport:
    """The report, comparing the best Arena figures with llama.cpp's and the concurrency target."""
    ours = [r for r in runs if r.engine == "arena"]
    theirs = next((r for r in runs if r.engine == "llama.cpp"), None)
    singles = [lv.tokens_per_s for r in ours if (lv := r.at(1)) is not None]
    reference = theirs.at(1) if theirs is not None else None
    share = (
        round(max(singles) / reference.tokens_per_s, 3)
        if singles and reference and reference.tokens_per_s
        else None
    )
    wide = [lv.tokens_per_s for r in ours if (lv := r.at(CONCURRENT_LEVEL)) is not None]
    concurrent = max(wide) if wide else None
    return ModelBenchReport(
        model=model,
        device=device,
        new_tokens=new_tokens,
        runs=runs,
        rollouts=rollouts,
        llama_cpp=llama_cpp,
        single_stream_share=share,
        concurrent_tokens_per_s=concurrent,
        single_stream_met=None if share is None else share >= SINGLE_STREAM_SHARE,
        concurrent_met=None if concurrent is None else concurrent >= CONCURRENT_TARGET,
    )
