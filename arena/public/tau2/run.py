"""Choosing τ² tasks, playing them and pooling the results: what `arena bench tau2` (and later the daemon) share.

`sample` picks a fixed, seeded set of tasks (the same for the same seed, size and import); `play`
runs one trial of a task end to end; `pass_hat_k` is τ²'s pass^k, the unbiased estimate over n
trials of a task with c successes, C(c, k) / C(n, k), averaged over tasks by `pass_hat_ks`;
`summarize` pools one domain's runs. A trial succeeds when its reward is 1 (within 1e-6), as in τ².
Intervals (Wilson) are the caller's: `arena` does not depend on the statistics package.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field

from arena.protocols import ChatModel, UserSimulator
from arena.public.tau2.docstore import DocStore, PortedTool
from arena.public.tau2.episode import Tau2Limits, Tau2Run, run_task

if TYPE_CHECKING:
    from arena.public.tau2.model import Tau2Domain, Tau2Task

T = TypeVar("T")


def _rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def sample(tasks: Sequence[T], limit: int | None, seed: int) -> list[T]:
    """`limit` tasks (all: None) chosen by a hash of the seed and the task id, in the tasks' order.

    A hash per task rather than a shuffle: a larger `limit` keeps the smaller one's tasks.
    """
    if limit is None:
        return list(tasks)
    keep = {t.id for t in sorted(tasks, key=lambda t: _rank(seed, t.id))[:limit]}  # type: ignore[attr-defined]
    return [t for t in tasks if t.id in keep]  # type: ignore[attr-defined]


def trial_seed(seed: int | None, task_id: str, trial: int) -> int:
    """The sampling seed of one trial: distinct per task and trial, fixed by the run's seed."""
    return int(_rank(seed or 0, f"{task_id}:{trial}")[:8], 16)


def is_success(reward: float) -> bool:
    """τ²'s success: a reward of 1, within 1e-6."""
    return abs(reward - 1.0) <= 1e-6


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one task with `c` successes in `n` trials: C(c, k) / C(n, k)."""
    if not 0 <= c <= n:
        raise ValueError(f"{c} successes in {n} trials")
    if not 1 <= k <= n:
        raise ValueError(f"k={k} needs 1 <= k <= n={n}")
    return math.comb(c, k) / math.comb(n, k)


def pass_hat_ks(successes: Mapping[str, Sequence[bool]], max_k: int | None = None) -> dict[int, float]:
    """pass^k for k = 1..max_k averaged over tasks; max_k defaults to the fewest trials of a task.

    As τ²: every task counts once whatever its number of trials, and k never exceeds the trials
    of the task that has fewest.
    """
    if not successes:
        return {}
    fewest = min(len(v) for v in successes.values())
    top = fewest if max_k is None else min(max_k, fewest)
    return {
        k: statistics.fmean(pass_hat_k(len(v), sum(v), k) for v in successes.values())
        for k in range(1, top + 1)
    }


async def play(
    domain: Tau2Domain,
    task: Tau2Task,
    policy: ChatModel,
    user: UserSimulator,
    limits: Tau2Limits | None = None,
    judge: ChatModel | None = None,
    *,
    trial: int = 0,
    tools: dict[str, PortedTool] | None = None,
    gold: DocStore | None = None,
) -> Tau2Run:
    """One trial of `task`, played and scored; a sampled trial gets its own seed."""
    limits = limits or Tau2Limits()
    if limits.temperature > 0:
        limits = limits.model_copy(update={"seed": trial_seed(limits.seed, task.id, trial)})
    return await run_task(domain, task, policy, user, limits, judge, tools=tools, gold=gold, trial=trial)


class DomainSummary(BaseModel):
    """One domain's runs pooled: success counts, pass^k, terminations, time."""

    domain: str
    tasks: int
    trials: int  # runs in all
    successes: int
    mean_reward: float
    pass_hat_k: dict[int, float] = Field(default_factory=dict)
    terminations: dict[str, int] = Field(default_factory=dict)
    seconds_per_run: float | None = None


def summarize(domain: str, runs: Iterable[Tau2Run]) -> DomainSummary:
    """Pool a domain's runs (pass^1 is successes / trials; pass^k over tasks, as τ²)."""
    runs = list(runs)
    by_task: dict[str, list[bool]] = defaultdict(list)
    for r in runs:
        by_task[r.task_id].append(is_success(r.score.reward if r.score else 0.0))
    rewards = [r.score.reward if r.score else 0.0 for r in runs]
    return DomainSummary(
        domain=domain,
        tasks=len(by_task),
        trials=len(runs),
        successes=sum(sum(v) for v in by_task.values()),
        mean_reward=statistics.fmean(rewards) if rewards else 0.0,
        pass_hat_k=pass_hat_ks(by_task),
        terminations=dict(Counter(r.termination for r in runs)),
        seconds_per_run=statistics.fmean(r.seconds for r in runs) if runs else None,
    )


def run_row(run: Tau2Run) -> dict[str, Any]:
    """One run as a report row: its reward and the parts of it."""
    score = run.score
    return {
        "task": run.task_id,
        "trial": run.trial,
        "reward": score.reward if score else None,
        "basis": score.basis if score else None,
        "db": score.db if score else None,
        "actions": score.actions if score else None,
        "communicate": score.communicate if score else None,
        "nl": score.nl if score else None,
        "termination": run.termination,
        "detail": run.detail,  # how the run ended
        "why": score.detail if score else None,  # why a part of the reward failed
        "nl_detail": run.nl_detail,
        "steps": run.steps,
        "calls": len(run.calls),
        "errors": run.errors,
        "malformed": run.malformed,
        "seconds": round(run.seconds, 3),
    }
