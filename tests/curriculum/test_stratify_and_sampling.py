"""Arena stratification and task allocation."""

from __future__ import annotations

from curriculum.sampling import EnvCandidate, allocate_tasks, learnability_weight
from curriculum.state import CurriculumConfig, CurriculumState, EnvCurriculum
from curriculum.stratify import StratifyConfig, draw_arena

CATEGORIES = {
    "hotels": "Travel",
    "flights": "Travel",
    "car_rental": "Travel",
    "calendar": "Productivity",
    "project_tracker": "Productivity",
    "banking": "Finance",
}


def test_arena_is_disjoint_and_keeps_training_envs_per_category() -> None:
    draw = draw_arena(CATEGORIES, round_id=1, config=StratifyConfig(per_category=5), seed=0)
    assert set(draw.arena).isdisjoint(draw.training)
    assert set(draw.arena) | set(draw.training) == set(CATEGORIES)
    # n // 2 caps K: Travel (3) gives 1, Productivity (2) gives 1, Finance (1) gives none.
    assert len(draw.by_category["Travel"]) == 1
    assert len(draw.by_category["Productivity"]) == 1
    assert draw.by_category["Finance"] == []
    assert "banking" in draw.training


def test_singletons_can_be_evaluated() -> None:
    draw = draw_arena(CATEGORIES, 1, StratifyConfig(evaluate_singletons=True), seed=0)
    assert "banking" in draw.arena


def test_redraw_schedule() -> None:
    config = StratifyConfig(redraw_every=3)
    draws = [draw_arena(CATEGORIES, r, config, seed=11) for r in range(1, 10)]
    assert [d.round for d in draws] == [1, 1, 1, 4, 4, 4, 7, 7, 7]
    assert draws[0].arena == draws[2].arena
    never = StratifyConfig()
    assert draw_arena(CATEGORIES, 1, never, 5).arena == draw_arena(CATEGORIES, 50, never, 5).arena
    # Different seeds give different draws somewhere across the schedule.
    assert {tuple(draw_arena(CATEGORIES, 1, config, s).arena) for s in range(20)} != {tuple(draws[0].arena)}


def test_weights_favour_learnable_and_weak_envs() -> None:
    config = CurriculumConfig(beta=1.0)
    assert learnability_weight(0.5, 0.0, config) > learnability_weight(0.95, 0.0, config)
    assert learnability_weight(0.5, 1.0, config) == 2 * learnability_weight(0.5, 0.0, config)
    assert learnability_weight(1.0, 0.0, config) == config.weight_floor


def test_simulated_budget_covers_uncovered_weak_category() -> None:
    state = CurriculumState(envs={"hotels": EnvCurriculum(env="hotels", success_ema=0.5)})
    candidates = [
        EnvCandidate(name="hotels", kind="executable", category="Travel"),
        EnvCandidate(name="sim_travel", kind="simulated", category="Travel", weakness=0.5),
        EnvCandidate(name="sim_health", kind="simulated", category="Health", weakness=0.5),
    ]
    alloc = allocate_tasks(
        state, candidates, total_tasks=40, config=CurriculumConfig(simulated_share=0.5), seed=1
    )
    assert alloc.executable_budget == 20 and alloc.simulated_budget == 20
    assert alloc.tasks["hotels"] == 20
    assert alloc.tasks["sim_health"] > alloc.tasks["sim_travel"]
