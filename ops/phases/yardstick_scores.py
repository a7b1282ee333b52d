"""The yardstick's figures: pass rates with Wilson 95% intervals, paired changes, the publish gate.

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
from curriculum.stats import paired_bootstrap_diff, wilson

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
    """The pass rate of `passed` out of `n` with its Wilson interval (`curriculum.stats.wilson`)."""
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


class PairedChange(BaseModel):
    """`after` − `before` pass rate on the tasks both ran, with a paired bootstrap 95% interval.

    The same fixed tasks, greedy: each task is its own control, so the interval is that of the
    per-task differences (far narrower than two independent intervals side by side).
    """

    tasks: int
    before: float
    after: float
    diff: float
    low: float
    high: float
    gained: int  # tasks that failed before and pass after
    lost: int  # tasks that passed before and fail after

    def text(self) -> str:
        """`+0.12 [+0.05, +0.19] on 42 tasks (6 gained, 1 lost)`."""
        return (
            f"{self.diff:+.2f} [{self.low:+.2f}, {self.high:+.2f}] on {self.tasks} tasks "
            f"({self.gained} gained, {self.lost} lost)"
        )


def paired_change(
    before_runs: Sequence[Any], after_runs: Sequence[Any], *, seed: int = 0, key: str = "task_id"
) -> PairedChange | None:
    """The paired change from `before_runs` to `after_runs` (None when they share no task); runs
    are paired on their attribute `key` (a public benchmark's runs on `entry_id`)."""
    before = {getattr(r, key): float(r.passed) for r in before_runs}
    after = {getattr(r, key): float(r.passed) for r in after_runs}
    shared = sorted(set(before) & set(after))
    if not shared:
        return None
    interval = paired_bootstrap_diff(
        {t: [before[t]] for t in shared}, {t: [after[t]] for t in shared}, resamples=2000, seed=seed
    )
    return PairedChange(
        tasks=len(shared),
        before=sum(before[t] for t in shared) / len(shared),
        after=sum(after[t] for t in shared) / len(shared),
        diff=round(interval.value, 6),
        low=round(interval.low, 6),
        high=round(interval.high, 6),
        gained=sum(after[t] > before[t] for t in shared),
        lost=sum(after[t] < before[t] for t in shared),
    )


class GateDecision(BaseModel):
    """Whether PUBLISH makes a trained policy live, and why (stored as an event)."""

    publish: bool
    reason: str
    parent: Score | None = None
    candidate: Score | None = None
    tasks: int = 0
    change: PairedChange | None = None  # candidate − parent, paired over the same tasks


def gate(
    parent_runs: Sequence[Any], candidate_runs: Sequence[Any], *, enabled: bool, key: str = "task_id"
) -> GateDecision:
    """Hold back a candidate that is worse than its parent on the yardstick, paired task by task.

    Both are compared on the tasks both ran (the same fixed tasks, greedy); the candidate is held
    back when the paired 95% interval of its change lies wholly below 0. A candidate whose change
    reaches 0 is not shown to be worse. Runs are paired on their attribute `key`.
    """
    if not enabled:
        return GateDecision(publish=True, reason="trainer.publish_gate is off")
    change = paired_change(parent_runs, candidate_runs, key=key)
    if change is None:
        return GateDecision(publish=True, reason="no yardstick runs of both policies to compare")
    n = change.tasks
    p = score(round(change.before * n), n)
    c = score(round(change.after * n), n)
    worse = change.high < 0
    verdict = "is worse than" if worse else "is not worse than"
    reason = f"yardstick {c.text()} {verdict} the parent's {p.text()}: paired change {change.text()}"
    return GateDecision(publish=not worse, reason=reason, parent=p, candidate=c, tasks=n, change=change)


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
