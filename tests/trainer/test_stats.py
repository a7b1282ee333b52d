"""Confidence intervals of the evaluation report."""

from __future__ import annotations

import pytest

from curriculum.stats import bootstrap_mean, paired_bootstrap_diff, wilson


def test_wilson_matches_the_textbook_value() -> None:
    # 8 successes out of 10: Wilson 95% interval (0.490, 0.943).
    i = wilson(8, 10)
    assert i.value == pytest.approx(0.8)
    assert i.low == pytest.approx(0.4902, abs=1e-3)
    assert i.high == pytest.approx(0.9433, abs=1e-3)


def test_wilson_edges_stay_in_unit_interval() -> None:
    assert wilson(0, 5).low == 0.0 and wilson(0, 5).high > 0.3
    assert wilson(5, 5).high == 1.0 and wilson(5, 5).low < 0.7
    assert (wilson(0, 0).low, wilson(0, 0).high) == (0.0, 1.0)


def test_bootstrap_resamples_tasks() -> None:
    constant = bootstrap_mean([[0.5, 0.5], [0.5]])
    assert (constant.low, constant.value, constant.high) == (0.5, 0.5, 0.5)
    spread = bootstrap_mean([[0.0], [1.0], [0.0], [1.0]])
    assert spread.low < spread.value == 0.5 < spread.high


def test_paired_difference_excludes_zero_only_when_every_task_improves() -> None:
    before = {f"t{i}": [0.0] for i in range(12)}
    after = {f"t{i}": [1.0] for i in range(12)}
    diff = paired_bootstrap_diff(before, after)
    assert diff.value == 1.0 and diff.low > 0
    # Half the tasks gain what the other half lose: no effect, and the interval straddles zero.
    first = {f"t{i}": [float(i % 2)] for i in range(12)}
    second = {f"t{i}": [float(1 - i % 2)] for i in range(12)}
    even = paired_bootstrap_diff(first, second)
    assert even.value == 0.0 and even.low < 0 < even.high


def test_pooled_rollout_stats_equal_the_stats_of_all_episodes_at_once() -> None:
    import statistics

    from trainer.metrics import RolloutStats

    batches = [[1.0, 0.0, 0.5, 0.5], [0.0, 0.0], [1.0, 1.0, 0.25]]
    stats = [
        RolloutStats(
            episodes=len(b),
            reward_mean=statistics.fmean(b),
            reward_std=statistics.pstdev(b),
            pass_rate=sum(r == 1.0 for r in b) / len(b),
        )
        for b in batches
    ]
    everything = [r for b in batches for r in b]
    pooled = RolloutStats.pooled(stats)
    assert pooled.episodes == len(everything)
    assert pooled.reward_mean == pytest.approx(statistics.fmean(everything))
    assert pooled.reward_std == pytest.approx(statistics.pstdev(everything))
    assert pooled.pass_rate == pytest.approx(3 / 9)
    assert RolloutStats.pooled([]) == RolloutStats()
