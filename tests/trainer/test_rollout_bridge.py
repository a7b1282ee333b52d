"""The rollout dictionary built from episodes: token layout, zero-variance groups, prompt keys.

These are control-flow tests over hand-made transcripts (scripted, no model): the real-model
test of the mask is in test_grpo_model.py.
"""

from __future__ import annotations

import pytest

from arena.episode.transcript import Segment, TokenChain, Transcript
from arena.tasks.reward import Verdict
from trainer.rollout import RolloutBridge, prompt_key, reward_from_rollout, task_prompt, training_sample
from trainer.tasks import PreparedTask

from .tiny import letters_task, tiny_config


def scripted_transcript(turns: int, *, broken: bool = False) -> Transcript:
    """A transcript whose chain alternates policy turns (ids 100+) and context (ids 900+)."""
    segments = [Segment(kind="prompt", token_ids=[1, 2, 3], turn=0)]
    for t in range(turns):
        if t:
            segments.append(Segment(kind="context", token_ids=[900 + t, 901 + t], turn=t))
        segments.append(
            Segment(kind="policy", token_ids=[100 + t] * (t + 2), logprobs=[-0.5] * (t + 2), turn=t)
        )
    chains = [TokenChain(segments=segments)]
    if broken:
        chains.append(
            TokenChain(
                segments=[
                    Segment(kind="prompt", token_ids=[7], turn=turns),
                    Segment(kind="policy", token_ids=[8], turn=turns),
                ]
            )
        )
    return Transcript(chains=chains, turns=[], tokens_complete=True)


def verdict(reward: float) -> Verdict:
    return Verdict(reward=reward, passed=reward == 1.0, checks=[])


def scripted_bridge(**config: object) -> RolloutBridge:
    task = letters_task()
    item = PreparedTask(task=task, env=None, expected_state=None, system_prompt="")
    return RolloutBridge([item], tiny_config(**config), policy_factory=lambda _t: None)  # type: ignore[arg-type,return-value]


def test_prompt_carries_the_task_key() -> None:
    assert prompt_key(task_prompt("library/renew")) == "library/renew"
    with pytest.raises(ValueError, match="task key"):
        prompt_key([{"role": "user", "content": "hello"}])


def test_sample_masks_exactly_the_policy_tokens() -> None:
    prompt, completion, mask, logprobs = training_sample(scripted_transcript(3), pad_id=0)
    assert prompt == [1, 2, 3]
    assert completion == [100, 100, 901, 902, 101, 101, 101, 902, 903, 102, 102, 102, 102]
    assert mask == [1 if 100 <= t < 200 else 0 for t in completion]
    assert logprobs == [-0.5 if m else 0.0 for m in mask]


def test_a_broken_chain_trains_only_its_first_part() -> None:
    _, completion, mask, _ = training_sample(scripted_transcript(2, broken=True), pad_id=0)
    assert 8 not in completion and sum(mask) == 5


def test_episode_without_tokens_fills_its_slot_untrained() -> None:
    assert training_sample(Transcript(), pad_id=5) == ([5], [5], [0], [0.0])


def test_zero_variance_groups_are_masked_and_counted() -> None:
    bridge = scripted_bridge()
    keys = ["library/a"] * 4 + ["library/b"] * 4
    rewards = [0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 0.0, 0.5]
    results = [(scripted_transcript(2), verdict(r)) for r in rewards]
    out = bridge.build_output(keys, results, pad_id=0, seconds=2.0)
    assert out["reward"] == rewards
    assert all(sum(m) == 0 for m in out["env_mask"][:4])  # no signal: dropped from the loss
    assert all(sum(m) == 5 for m in out["env_mask"][4:])
    stats = bridge.history[-1]
    assert (stats.groups, stats.zero_variance_groups, stats.zero_variance_fraction) == (2, 1, 0.5)
    assert stats.reward_mean == pytest.approx(sum(rewards) / 8)
    assert stats.generated_tokens == 8 * 5 and stats.seconds == 2.0


def test_zero_variance_groups_kept_when_configured() -> None:
    bridge = scripted_bridge(drop_zero_variance=False)
    out = bridge.build_output(["k"] * 2, [(scripted_transcript(1), verdict(0.0))] * 2, pad_id=0, seconds=1.0)
    assert all(sum(m) == 2 for m in out["env_mask"])
    assert bridge.history[-1].zero_variance_groups == 1


def test_reward_function_returns_rollout_rewards() -> None:
    assert reward_from_rollout([], [], reward=[0.25, float("nan"), 1.0]) == [0.25, 0.0, 1.0]
