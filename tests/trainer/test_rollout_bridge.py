"""The rollout dictionary built from episodes: token layout, zero-variance groups, prompt keys.

These are control-flow tests over hand-made transcripts (scripted, no model): the real-model
test of the mask is in test_grpo_model.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.episode.transcript import Segment, TokenChain, Transcript
from arena.tasks.reward import Verdict
from trainer.rollout import RolloutBridge, SampledBatch, prompt_key, reward_from_rollout, task_prompt
from trainer.samples import training_sample
from work.tasks import PreparedTask

from .tiny import letters_task, tiny_config


def scripted_transcript(turns: int, *, broken: bool = False, finish: str = "answered") -> Transcript:
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
    return Transcript(chains=chains, turns=[], tokens_complete=True, finish=finish)


def verdict(reward: float) -> Verdict:
    return Verdict(reward=reward, passed=reward == 1.0, checks=[])


def scripted_bridge(*task_ids: str, **config: object) -> RolloutBridge:
    items = [
        PreparedTask(task=letters_task(task_id), env=None, expected_state=None, system_prompt="")
        for task_id in task_ids or ("say-something",)
    ]
    return RolloutBridge(items, tiny_config(**config), policy_factory=lambda _t: None)  # type: ignore[arg-type,return-value]


def scripted_rollouts(bridge: RolloutBridge, rewards: dict[str, list[float]]) -> list[list[str]]:
    """Replace the bridge's episodes by scripted ones: task id -> its rewards, episode after episode.

    Returns the log of the key lists each rollout call was given.
    """
    calls: list[list[str]] = []
    served: dict[str, int] = {}

    async def rollout(keys: list[str], policy: object = None) -> list[tuple[Transcript, Verdict]]:
        calls.append(list(keys))
        out = []
        for key in keys:
            task_id = key.split("/", 1)[1]
            n = served.get(task_id, 0)
            served[task_id] = n + 1
            out.append((scripted_transcript(1), verdict(rewards[task_id][n])))
        return out

    bridge.rollout = rollout  # type: ignore[method-assign]
    return calls


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
    out = bridge.build_output(SampledBatch(keys, results), pad_id=0, seconds=2.0)
    assert out["reward"] == rewards
    assert all(sum(m) == 0 for m in out["env_mask"][:4])  # no signal: dropped from the loss
    assert all(sum(m) == 5 for m in out["env_mask"][4:])
    stats = bridge.history[-1]
    assert (stats.groups, stats.zero_variance_groups, stats.zero_variance_fraction) == (2, 1, 0.5)
    assert stats.reward_mean == pytest.approx(sum(rewards) / 8)
    assert stats.generated_tokens == 8 * 5 and stats.seconds == 2.0


def test_zero_variance_groups_kept_when_configured() -> None:
    bridge = scripted_bridge(drop_zero_variance=False)
    out = bridge.build_output(
        SampledBatch(["k"] * 2, [(scripted_transcript(1), verdict(0.0))] * 2), pad_id=0, seconds=1.0
    )
    assert all(sum(m) == 2 for m in out["env_mask"])
    assert bridge.history[-1].zero_variance_groups == 1


def test_reward_function_returns_rollout_rewards_and_none_for_the_unscored() -> None:
    assert reward_from_rollout([], [], reward=[0.25, float("nan"), 1.0]) == [0.25, None, 1.0]


@pytest.mark.parametrize("finish", ["env_error", "model_error"])
def test_an_infrastructure_error_leaves_its_groups_advantages_alone(finish: str, tmp_path: Path) -> None:
    """TRL's own scoring of a step: the failed episode (scored 0 by the verifier) trains nothing and
    the others' advantages are those of their group without it; the round counts it."""
    import torch
    from datasets import Dataset

    from trainer.grpo import grpo_args
    from trainer.policy_logps import policy_token_trainer_class

    from .tiny import tiny_causal_lm, tiny_tokenizer

    rewards, failed = [1.0, 0.0, 1.0, 0.0], 3
    batch = SampledBatch(
        ["library/a"] * 4,
        [
            (scripted_transcript(2, finish=finish if i == failed else "answered"), verdict(r))
            for i, r in enumerate(rewards)
        ],
    )
    bridge = scripted_bridge("a")
    config = tiny_config(group_size=4, micro_batch_size=4)
    trainer = policy_token_trainer_class()(
        model=tiny_causal_lm(vocab_size=1024),
        reward_funcs=[reward_from_rollout],
        args=grpo_args(config, tmp_path, max_steps=1, seed=0),
        train_dataset=Dataset.from_list([{"prompt": task_prompt("library/a")}]),
        processing_class=tiny_tokenizer(1024),
        rollout_func=lambda _prompts, _trainer: bridge.build_output(batch, pad_id=0, seconds=1.0),
    )
    # One dict per entry: TRL writes each entry's extra fields (its reward) into it.
    out = trainer._generate_and_score_completions([{"prompt": task_prompt("library/a")} for _ in range(4)])
    scored = torch.tensor([r for i, r in enumerate(rewards) if i != failed])
    expected = (scored - scored.mean()) / (scored.std() + 1e-4)  # TRL's group scaling, without it
    others = [i for i in range(4) if i != failed]
    assert torch.allclose(out["advantages"][others], expected, atol=1e-5), (out["advantages"], expected)
    assert out["advantages"][failed] == 0 and out["tool_mask"][failed].sum() == 0
    stats = bridge.history[-1]
    assert (stats.episodes, stats.infra_errors, stats.reward_mean) == (4, 1, pytest.approx(2 / 3))


def test_a_group_whose_only_difference_is_a_failed_episode_has_no_signal() -> None:
    bridge = scripted_bridge()
    results = [
        (scripted_transcript(1, finish="env_error" if i == 0 else "answered"), verdict(r))
        for i, r in enumerate([0.0, 1.0, 1.0, 1.0])
    ]
    out = bridge.build_output(SampledBatch(["k"] * 4, results), pad_id=0, seconds=1.0)
    assert all(sum(m) == 0 for m in out["env_mask"])  # scored alike: dropped, not trained on a failure
    assert bridge.history[-1].zero_variance_groups == 1


@pytest.mark.anyio
async def test_dynamic_sampling_replaces_flat_groups_by_groups_with_signal() -> None:
    """Scripted rewards: `a` is flat, its first substitute too, the next one has signal."""
    bridge = scripted_bridge("a", "b", "c", "d", dynamic_sampling_passes=3)
    rewards = {"a": [0.0] * 2, "b": [0.0, 1.0], "c": [1.0] * 2, "d": [0.0, 0.5]}
    calls = scripted_rollouts(bridge, rewards)
    batch = await bridge.sample(["library/a"] * 2 + ["library/b"] * 2, step=3)
    # Pass 1 replaces a's group by one of c, d; pass 2 (if c was drawn first) by the other one.
    assert calls[0] == ["library/a"] * 2 + ["library/b"] * 2
    drawn = [call[0] for call in calls[1:]]
    assert all(len(set(call)) == 1 and len(call) == 2 for call in calls[1:])  # one group per flat group
    assert (
        drawn[-1] == "library/d"
        and set(drawn) <= {"library/c", "library/d"}
        and len(set(drawn)) == len(drawn)
    )
    assert batch.keys == ["library/d"] * 2 + ["library/b"] * 2
    assert [float(v.reward) for _, v in batch.episodes] == [0.0, 0.5, 0.0, 1.0]
    assert batch.resampled_groups == 1
    # Every episode that ran but is not trained on is kept (a's group, and c's if it was drawn).
    assert sorted(k for k, _, _ in batch.extra) == sorted(
        ["library/a"] * 2 + [k for k in drawn[:-1] for _ in "xx"]
    )
    out = bridge.build_output(batch, pad_id=0, seconds=1.0)
    assert all(sum(m) > 0 for m in out["env_mask"])  # nothing left to drop
    stats = bridge.history[-1]
    assert (stats.groups, stats.zero_variance_groups, stats.resampled_groups) == (2, 0, 1)
    assert stats.discarded_episodes == len(batch.extra)


@pytest.mark.anyio
async def test_dynamic_sampling_is_seeded_by_step_and_bounded_by_its_passes() -> None:
    flat = {k: [0.0] * 8 for k in "abcdef"}

    async def draws(step: int, passes: int) -> list[list[str]]:
        bridge = scripted_bridge(*"abcdef", dynamic_sampling_passes=passes)
        calls = scripted_rollouts(bridge, flat)
        batch = await bridge.sample(["library/a"] * 2, step=step)
        assert batch.keys == ["library/a"] * 2 and batch.resampled_groups == 0  # all flat: kept as drawn
        assert len(batch.extra) == 2 * (len(calls) - 1)
        return calls

    assert len(await draws(0, 2)) == 3  # the first batch and two passes
    assert await draws(5, 2) == await draws(5, 2)  # a resumed step draws the same substitutes
    assert len(await draws(0, 0)) == 1
    assert len(await draws(0, 16)) == 6  # the pool runs out: every other task tried once


@pytest.mark.anyio
async def test_discarded_episodes_reach_the_outcome_callback() -> None:
    bridge = scripted_bridge("a", "b", dynamic_sampling_passes=1)
    seen: list[str] = []
    bridge.on_rollout = lambda _stats, episodes: seen.extend(k for k, _, _ in episodes)
    scripted_rollouts(bridge, {"a": [0.0, 0.0], "b": [0.0, 1.0]})
    batch = await bridge.sample(["library/a"] * 2, step=0)
    bridge.build_output(batch, pad_id=0, seconds=1.0)
    assert sorted(seen) == ["library/a"] * 2 + ["library/b"] * 2
