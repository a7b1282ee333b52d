"""The yardstick's figures: pass rates with Wilson 95% intervals, the publish gate, the metrics.

Pure functions over stored runs (`arena.store.YardstickRunRow` or anything with `task_id`, `env`,
`level` and `passed`), so EVALUATE, PUBLISH, `arena status` and `arena report` compute the same
numbers the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from arena.difficulty import Difficulty

# Fixed difficulty levels: the yardstick never follows the curriculum, so its pass rate can move
# only because the policy changed. Distractors stay 0 (the yardstick shows every tool anyway) and
# tasks stay autonomous (no simulated user between the policy and the measurement).
LEVELS: dict[str, Difficulty] = {
    "easy": Difficulty(walk_length=1),
    "medium": Difficulty(walk_length=3, ambiguity=1, weak_edge_share=1),
    "hard": Difficulty(walk_length=5, ambiguity=2, weak_edge_share=2),
}
ALL = "all"


class Score(BaseModel):
    """A pass rate over `n` greedy episodes with its Wilson 95% interval."""

    passed: int
    n: int
    rate: float
    low: float
    high: float

    def text(self) -> str:
        """`0.50 [0.19, 0.81] (3/6)`."""
        return f"{self.rate:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.passed}/{self.n})"


def score(passed: int, n: int) -> Score:
    """The pass rate of `passed` out of `n` with its Wilson interval (`trainer.evaluate.wilson`)."""
    from trainer.evaluate import wilson

    interval = wilson(passed, n)
    return Score(passed=passed, n=n, rate=interval.value, low=interval.low, high=interval.high)


class YardstickSummary(BaseModel):
    """One policy on the yardstick: overall, and per environment by level (`all`: every level)."""

    stage: str
    policy: str
    tasks: int
    overall: Score
    envs: dict[str, dict[str, Score]]


def summarize(runs: Iterable[Any], *, stage: str, policy: str) -> YardstickSummary:
    """Pool `runs` overall, per environment, and per environment and level."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    runs = list(runs)
    for run in runs:
        for key in ((run.env, run.level), (run.env, ALL)):
            counts[key][0] += int(run.passed)
            counts[key][1] += 1
    envs: dict[str, dict[str, Score]] = defaultdict(dict)
    for (env, level), (passed, n) in sorted(counts.items()):
        envs[env][level] = score(passed, n)
    return YardstickSummary(
        stage=stage,
        policy=policy,
        tasks=len(runs),
        overall=score(sum(int(r.passed) for r in runs), len(runs)),
        envs=dict(envs),
    )


class GateDecision(BaseModel):
    """Whether PUBLISH makes a trained policy live, and why (stored as an event)."""

    publish: bool
    reason: str
    parent: Score | None = None
    candidate: Score | None = None
    tasks: int = 0


def gate(parent_runs: Sequence[Any], candidate_runs: Sequence[Any], *, enabled: bool) -> GateDecision:
    """Hold back a candidate whose yardstick pass rate is below its parent's 95% interval.

    Both are compared on the tasks both ran (the same fixed tasks, greedy). The parent's interval
    is the yardstick's own noise at its size: a candidate inside it is not shown to be worse.
    """
    if not enabled:
        return GateDecision(publish=True, reason="trainer.publish_gate is off")
    parent = {r.task_id: r for r in parent_runs}
    candidate = {r.task_id: r for r in candidate_runs}
    shared = sorted(set(parent) & set(candidate))
    if not shared:
        return GateDecision(publish=True, reason="no yardstick runs of both policies to compare")
    p = score(sum(int(parent[t].passed) for t in shared), len(shared))
    c = score(sum(int(candidate[t].passed) for t in shared), len(shared))
    if c.passed < p.passed and c.rate < p.low:
        reason = f"yardstick {c.text()} is below the parent's 95% interval: parent {p.text()}"
        return GateDecision(publish=False, reason=reason, parent=p, candidate=c, tasks=len(shared))
    reason = f"yardstick {c.text()} is not below the parent's 95% interval: parent {p.text()}"
    return GateDecision(publish=True, reason=reason, parent=p, candidate=c, tasks=len(shared))


def publish_metrics(metrics: Any, summary: dict[str, Any]) -> None:
    """Set `arena_yardstick_pass_rate{environment,level}` and the overall rate with its bounds."""
    data = YardstickSummary.model_validate(summary)
    for env, levels in data.envs.items():
        for level, s in levels.items():
            metrics.yardstick_pass_rate.labels(environment=metrics.env(env), level=level).set(s.rate)
    if data.overall.n:
        metrics.yardstick_overall.set(data.overall.rate)
        metrics.yardstick_overall_low.set(data.overall.low)
        metrics.yardstick_overall_high.set(data.overall.high)
