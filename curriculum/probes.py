"""Difficulty spread within a round: the current level and ±1 on one knob at a time.

If all of an environment's tasks share one difficulty, every knob's success rate is the same
number and the controller cannot tell which knob the policy has mastered. `spread` gives about
half of an environment's tasks the current difficulty and the rest *probes*: the current point
moved by one level on a single knob. Which probes a round gets rotates with the round, so a small
budget still measures every knob over a few rounds; the controller reads them back with
`curriculum.controller.probe_key`.
"""

from __future__ import annotations

from arena.difficulty import KNOBS, RAISE_ORDER, Difficulty


def probe_points(current: Difficulty) -> list[Difficulty]:
    """Every difficulty one level from `current` on one knob: raises first (in `RAISE_ORDER`), then lowers."""
    ups = [
        current.with_level(k, current.level(k) + 1)
        for k in RAISE_ORDER
        if current.level(k) < KNOBS[k].max_level
    ]
    downs = [
        current.with_level(k, current.level(k) - 1)
        for k in RAISE_ORDER
        if current.level(k) > KNOBS[k].min_level
    ]
    return ups + downs


def spread(current: Difficulty, n: int, round_id: int) -> list[tuple[Difficulty, int]]:
    """`n` tasks as (difficulty, count): ⌈n/2⌉ at `current`, the rest one per probe, rotating by round."""
    if n <= 0:
        return []
    at_level = (n + 1) // 2
    points = probe_points(current)
    out: dict[Difficulty, int] = {current: at_level}
    if points:
        start = (round_id * max(1, n - at_level)) % len(points)
        for i in range(n - at_level):
            point = points[(start + i) % len(points)]
            out[point] = out.get(point, 0) + 1
    else:
        out[current] = n
    return list(out.items())
