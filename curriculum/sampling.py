"""How many tasks each training environment gets next round.

Weight of an environment = max(floor, p·(1−p)) × (1 + β·weakness), where p is its success EMA
(0.5 before any evidence) and weakness ∈ [0, 1] comes from the diagnosis. p·(1−p) is the variance
of a pass/fail reward, so it favours environments where GRPO groups are least likely to have zero
variance (learnability); the floor keeps every environment in play.
The budget is split between executable and simulated environments by `simulated_share`;
simulated environments whose category is weak but has no executable training environment get their
weakness counted in full, so the simulated budget covers what the executable pool cannot.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from curriculum.state import CurriculumConfig, CurriculumState


class EnvCandidate(BaseModel):
    """An environment the planner may give tasks to."""

    name: str
    kind: Literal["executable", "simulated"]
    category: str
    weakness: float = Field(default=0.0, ge=0.0, le=1.0)


class Allocation(BaseModel):
    """Tasks per environment for the next round, with the weights behind it."""

    tasks: dict[str, int]
    weights: dict[str, float]
    executable_budget: int
    simulated_budget: int


def learnability_weight(success_ema: float | None, weakness: float, config: CurriculumConfig) -> float:
    """The sampling weight of one environment (see the module docstring)."""
    p = 0.5 if success_ema is None else success_ema
    return max(config.weight_floor, p * (1.0 - p)) * (1.0 + config.beta * weakness)


def _split(budget: int, weights: dict[str, float], minimum: int, rng: np.random.Generator) -> dict[str, int]:
    """Integer allocation proportional to weights, each name getting `minimum` first when it fits.

    Largest remainders take the leftover tasks; ties among equal remainders are broken by the seeded
    generator so that the plan is deterministic under a seed but not biased by name order.
    """
    names = sorted(weights)
    if not names or budget <= 0:
        return dict.fromkeys(names, 0)
    base = minimum if minimum * len(names) <= budget else 0
    out = dict.fromkeys(names, base)
    rest = budget - base * len(names)
    total = sum(weights[n] for n in names)
    shares = {n: rest * weights[n] / total for n in names}
    for n in names:
        out[n] += int(np.floor(shares[n]))
    left = budget - sum(out.values())
    jitter = rng.random(len(names))
    order = sorted(range(len(names)), key=lambda i: (-(shares[names[i]] % 1.0), jitter[i]))
    for i in order[:left]:
        out[names[i]] += 1
    return out


def allocate_tasks(
    state: CurriculumState,
    candidates: list[EnvCandidate],
    total_tasks: int,
    config: CurriculumConfig,
    seed: int,
) -> Allocation:
    """Decide the number of tasks per environment for the next round (deterministic under `seed`)."""
    rng = np.random.default_rng(seed)
    executable = [c for c in candidates if c.kind == "executable"]
    simulated = [c for c in candidates if c.kind == "simulated"]
    covered = {c.category for c in executable}
    sim_budget = round(total_tasks * config.simulated_share) if simulated else 0
    if not executable:
        sim_budget = total_tasks
    exe_budget = total_tasks - sim_budget

    def weight(c: EnvCandidate) -> float:
        record = state.envs.get(c.name)
        weakness = c.weakness
        if c.kind == "simulated" and c.category not in covered:
            # Nothing executable trains this category: let the simulated pool carry its weakness fully.
            weakness = min(1.0, weakness * 2)
        return learnability_weight(record.success_ema if record else None, weakness, config)

    weights = {c.name: weight(c) for c in candidates}
    tasks = _split(exe_budget, {c.name: weights[c.name] for c in executable}, config.min_tasks_per_env, rng)
    tasks |= _split(sim_budget, {c.name: weights[c.name] for c in simulated}, config.min_tasks_per_env, rng)
    return Allocation(tasks=tasks, weights=weights, executable_budget=exe_budget, simulated_budget=sim_budget)
