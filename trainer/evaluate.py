"""Evaluating a policy on prepared tasks, with confidence intervals.

Pass rates get a Wilson score interval; mean rewards a percentile bootstrap over tasks (episodes of
one task are correlated, so tasks are the resampling unit). Differences between two policies on
the same tasks (GRPO vs SFT) get a paired bootstrap over tasks. The statistics themselves are
`curriculum.stats`, which the yardstick's scores share without importing the trainer.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import anyio
from pydantic import BaseModel

from arena.protocols import ChatModel, UserSimulator
from curriculum.stats import Interval, bootstrap_mean, wilson
from trainer.config import TrainerConfig
from trainer.rollout import episode_view
from work.episode import run_and_verify
from work.tasks import PreparedTask


class EpisodeScore(BaseModel):
    """One evaluated episode."""

    task: str
    env: str
    sample: int
    reward: float
    passed: bool
    turns: int
    calls: int
    finish: str
    # What went wrong, for reading a report: the tools called in order (a trailing "!" marks an
    # error result) and the names of the checks that failed.
    tools: list[str] = []
    failed_checks: list[str] = []


class EvalSummary(BaseModel):
    """Pass rate and mean reward of a set of episodes."""

    episodes: int
    tasks: int
    pass_rate: Interval
    reward: Interval


class EvalReport(BaseModel):
    """A policy's evaluation: overall, per environment, and every episode."""

    overall: EvalSummary
    per_env: dict[str, EvalSummary]
    episodes: list[EpisodeScore]
    seconds: float
    peak_rss_mb: int | None = None  # the process's resident peak while evaluating, where measured


def summarize(episodes: Sequence[EpisodeScore]) -> EvalSummary:
    """Pass rate (Wilson) and mean reward (task bootstrap) of some episodes."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for e in episodes:
        by_task[e.task].append(e.reward)
    return EvalSummary(
        episodes=len(episodes),
        tasks=len(by_task),
        pass_rate=wilson(sum(e.passed for e in episodes), len(episodes)),
        reward=bootstrap_mean(list(by_task.values())),
    )


def per_task(report: EvalReport, field: str = "passed") -> dict[str, list[float]]:
    """Per-task lists of `passed` (as 0/1) or `reward`, for paired comparisons."""
    out: dict[str, list[float]] = defaultdict(list)
    for e in report.episodes:
        out[e.task].append(float(getattr(e, field)))
    return dict(out)


async def evaluate(
    policy: ChatModel,
    tasks: Sequence[PreparedTask],
    config: TrainerConfig,
    *,
    samples: int = 1,
    user: UserSimulator | None = None,
    judge: ChatModel | None = None,
    sandbox: Any = None,
) -> EvalReport:
    """Run `samples` episodes of every task with `config.episode` (same caps and history as training)."""
    started = time.perf_counter()
    limiter = anyio.CapacityLimiter(config.rollout_concurrency)
    scores: list[EpisodeScore] = []
    view = episode_view(config)

    async def one(item: PreparedTask, sample: int) -> None:
        async with limiter:
            transcript, verdict = await run_and_verify(
                policy, item, view, user=user, judge=judge, sandbox=sandbox
            )
        scores.append(
            EpisodeScore(
                task=item.key,
                env=item.task.env,
                sample=sample,
                reward=verdict.reward,
                passed=verdict.passed,
                turns=transcript.num_turns,
                calls=len(transcript.calls),
                finish=transcript.finish,
                tools=[r.call.name + ("" if r.result.ok else "!") for r in transcript.calls],
                failed_checks=[c.name for c in verdict.checks if not c.passed],
            )
        )

    async with anyio.create_task_group() as tg:
        for item in tasks:
            for s in range(samples):
                tg.start_soon(one, item, s)
    scores.sort(key=lambda e: (e.task, e.sample))
    envs = sorted({e.env for e in scores})
    return EvalReport(
        overall=summarize(scores),
        per_env={env: summarize([e for e in scores if e.env == env]) for env in envs},
        episodes=scores,
        seconds=time.perf_counter() - started,
    )
