"""The public yardstick's figures: accuracy per category and overall with Wilson 95% intervals.

Pure functions over scored entries (anything with `entry_id`, `category`, `passed`, `error_type`,
`seconds`: stored `PublicRunRow`s, or `arena bench bfcl`'s verdicts), so the daemon, `arena status`,
`arena report` and the bench compute the same numbers the same way. Kept apart from Arena's own
yardstick (`ops.phases.yardstick_scores`), whose `Score` and gate it reuses.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from ops.phases.yardstick_scores import GateDecision, Score, gate, score

ALL = "all"
State = Literal["measured", "off", "not_imported", "unavailable"]


class PublicYardstick(BaseModel):
    """One policy on a public benchmark's fixed sample, or why it was not measured (`state`)."""

    state: State = "measured"
    note: str = ""
    benchmark: str = "bfcl"
    version: str | None = None
    stage: str = "live"
    policy: str | None = None
    entries: list[str] = Field(default_factory=list)
    categories: dict[str, Score] = Field(default_factory=dict)
    overall: Score | None = None
    errors: dict[str, int] = Field(default_factory=dict)
    seconds_per_entry: float | None = None
    sandboxed: bool = False
    reused_from: dict[str, Any] | None = None
    # Where a judge scores part of the benchmark (τ²'s NL assertions): whose, and its measured agreement.
    judge: dict[str, Any] | None = None


class ScoredEntry(BaseModel):
    """One scored entry, as `summarize` reads it (a `PublicRunRow` has the same fields)."""

    entry_id: str
    category: str
    passed: bool
    error_type: str | None = None
    seconds: float | None = None


def _order(category: str) -> tuple[int, str]:
    from arena.public.bfcl.dist import CATEGORIES

    return (CATEGORIES.index(category) if category in CATEGORIES else len(CATEGORIES), category)


def summarize(
    runs: Iterable[Any], *, benchmark: str, version: str, stage: str, policy: str, **extra: Any
) -> PublicYardstick:
    """Pool scored entries per category and overall."""
    runs = sorted(runs, key=lambda r: r.entry_id)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in runs:
        counts[r.category][0] += int(r.passed)
        counts[r.category][1] += 1
    seconds = [float(r.seconds) for r in runs if getattr(r, "seconds", None) is not None]
    return PublicYardstick(
        benchmark=benchmark,
        version=version,
        stage=stage,
        policy=policy,
        entries=[r.entry_id for r in runs],
        categories={cat: score(*counts[cat]) for cat in sorted(counts, key=_order)},
        overall=score(sum(int(r.passed) for r in runs), len(runs)),
        errors=dict(Counter(r.error_type for r in runs if not r.passed and r.error_type)),
        seconds_per_entry=sum(seconds) / len(seconds) if seconds else None,
        **extra,
    )


def public_gate(parent_runs: Sequence[Any], candidate_runs: Sequence[Any], *, enabled: bool) -> GateDecision:
    """`yardstick_scores.gate` on the public yardstick's entries (the same fixed entries, greedy)."""
    if not enabled:
        return GateDecision(publish=True, reason="public.publish_gate is off")
    decision = gate(parent_runs, candidate_runs, enabled=True, key="entry_id")
    return decision.model_copy(update={"reason": f"public yardstick: {decision.reason}"})


def publish_metrics(metrics: Any, data: dict[str, Any] | None) -> None:
    """Set `arena_public_accuracy{benchmark,category}` and its interval's bounds (`all`: overall)."""
    if not data or data.get("state") != "measured":
        return
    summary = PublicYardstick.model_validate(data)
    bench = summary.benchmark
    scores = {**summary.categories, ALL: summary.overall}
    for category, s in scores.items():
        if s is None or not s.n:
            continue
        labels = {"benchmark": bench, "category": metrics.public_category(category)}
        metrics.public_accuracy.labels(**labels).set(s.rate)
        metrics.public_accuracy_low.labels(**labels).set(s.low)
        metrics.public_accuracy_high.labels(**labels).set(s.high)
