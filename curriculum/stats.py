"""The Wilson score interval: how sure a pass rate over a few episodes is (curriculum and diagnosis)."""

from __future__ import annotations

import math

Z95 = 1.959963984540054


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
