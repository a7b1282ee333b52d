"""How sure a figure over a few episodes is: the Wilson score interval of a pass rate (curriculum,
diagnosis, the yardstick), a bootstrap over tasks for a mean, a paired one for a change."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from pydantic import BaseModel

Z95 = 1.959963984540054


class Interval(BaseModel):
    """A point estimate and its 95% interval."""

    value: float
    low: float
    high: float


def wilson_interval(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (successes may be fractional, e.g. weighted)."""
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, successes / n))
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At 0 (or all) successes the bound is exactly 0 (or 1); the float sum leaves ~1e-17, which
    # would put a rate of 0.0 "below" an interval starting at 0.
    low = 0.0 if p <= 0.0 else max(0.0, centre - half)
    high = 1.0 if p >= 1.0 else min(1.0, centre + half)
    return low, high


def wilson(successes: int, n: int, z: float = Z95) -> Interval:
    """The Wilson score interval of a proportion, with its point estimate."""
    low, high = wilson_interval(successes, n, z)
    return Interval(value=successes / n if n else 0.0, low=low, high=high)


def bootstrap_mean(groups: Sequence[Sequence[float]], *, resamples: int = 2000, seed: int = 0) -> Interval:
    """Mean over all values, with a percentile bootstrap interval resampling whole groups (tasks)."""
    flat = [v for g in groups for v in g]
    if not flat:
        return Interval(value=0.0, low=0.0, high=0.0)
    rng = random.Random(seed)
    means: list[float] = []
    for _ in range(resamples):
        picked = [groups[rng.randrange(len(groups))] for _ in groups]
        values = [v for g in picked for v in g]
        means.append(statistics.fmean(values) if values else 0.0)
    means.sort()
    return Interval(
        value=statistics.fmean(flat),
        low=means[int(0.025 * (resamples - 1))],
        high=means[int(0.975 * (resamples - 1))],
    )


def paired_bootstrap_diff(
    a: dict[str, list[float]], b: dict[str, list[float]], *, resamples: int = 2000, seed: int = 0
) -> Interval:
    """Mean of b − a over tasks both evaluated, with a paired percentile bootstrap over tasks."""
    keys = sorted(set(a) & set(b))
    diffs = [statistics.fmean(b[k]) - statistics.fmean(a[k]) for k in keys if a[k] and b[k]]
    if not diffs:
        return Interval(value=0.0, low=0.0, high=0.0)
    rng = random.Random(seed)
    means = sorted(
        statistics.fmean(diffs[rng.randrange(len(diffs))] for _ in diffs) for _ in range(resamples)
    )
    return Interval(
        value=statistics.fmean(diffs),
        low=means[int(0.025 * (resamples - 1))],
        high=means[int(0.975 * (resamples - 1))],
    )
