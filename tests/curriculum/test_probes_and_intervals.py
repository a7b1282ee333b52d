"""Per-knob evidence: a round's tasks span probes, and decisions rest on intervals with their evidence."""

from __future__ import annotations

from arena.difficulty import Difficulty
from curriculum.controller import probe_key, update_curriculum
from curriculum.probes import probe_points, spread
from curriculum.state import CurriculumConfig, CurriculumState, EpisodeOutcome

CONFIG = CurriculumConfig()
BASE = Difficulty()


def outcomes(env: str, difficulty: Difficulty, passed: int, failed: int) -> list[EpisodeOutcome]:
    return [EpisodeOutcome(env=env, passed=i < passed, difficulty=difficulty) for i in range(passed + failed)]


def test_spread_puts_half_at_the_level_and_the_rest_one_knob_away() -> None:
    plan = dict(spread(BASE, 6, round_id=1))
    assert plan[BASE] == 3 and sum(plan.values()) == 6
    assert all(probe_key(BASE, d) for d in plan if d != BASE)
    # Rounds rotate through the probes, so a small budget still reaches every knob.
    seen = {d for r in range(12) for d, _ in spread(BASE, 2, round_id=r) if d != BASE}
    assert seen == set(probe_points(BASE))


def test_four_mixed_episodes_are_no_evidence_but_four_passes_are() -> None:
    _, [d] = update_curriculum(CurriculumState(), outcomes("a", BASE, 3, 1), CONFIG, 1)
    assert d.action == "hold" and "interval reaches the band centre" in d.reason
    assert d.interval is not None and d.interval[0] < 0.5
    _, [d] = update_curriculum(CurriculumState(), outcomes("a", BASE, 4, 0), CONFIG, 1)
    assert d.action == "raise" and "4/4 passed" in d.reason and d.interval[0] > 0.5


def test_the_raised_knob_is_the_one_whose_probe_succeeded_best() -> None:
    ambiguity = BASE.with_level("ambiguity", 1)
    walk = BASE.with_level("walk_length", 3)
    batch = outcomes("a", BASE, 8, 0) + outcomes("a", ambiguity, 4, 0) + outcomes("a", walk, 0, 4)
    state, [d] = update_curriculum(CurriculumState(), batch, CONFIG, 1)
    assert (d.action, d.knob) == ("raise", "ambiguity")
    assert "ambiguity+1: 4/4 passed" in d.reason
    assert state.envs["a"].difficulty == ambiguity and state.envs["a"].level_episodes == 0


def test_lowering_prefers_the_probe_below_that_succeeds() -> None:
    start = Difficulty(walk_length=3, ambiguity=1)
    state = CurriculumState()
    state.env("a", start)
    easier = start.with_level("ambiguity", 0)
    batch = (
        outcomes("a", start, 0, 6)
        + outcomes("a", easier, 3, 0)
        + outcomes("a", start.with_level("walk_length", 2), 0, 3)
    )
    state, [d] = update_curriculum(state, batch, CONFIG, 1)
    assert (d.action, d.knob) == ("lower", "ambiguity") and "ambiguity-1: 3/3 passed" in d.reason


def test_evidence_accumulates_over_rounds_until_it_is_enough() -> None:
    config = CurriculumConfig(min_episodes=4)
    state, [d] = update_curriculum(CurriculumState(), outcomes("a", BASE, 2, 0), config, 1)
    assert d.action == "insufficient"
    state, [d] = update_curriculum(state, outcomes("a", BASE, 0, 0), config, 2, envs=["a"])
    assert state.envs["a"].level_episodes == 2  # a round without episodes keeps the evidence
    state, [d] = update_curriculum(state, outcomes("a", BASE, 4, 0), config, 3)
    assert d.action == "raise" and d.episodes == 5  # 2 weighted by (1 - ema_alpha), then 4
