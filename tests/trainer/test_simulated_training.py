"""GRPO on a simulated environment, with the real embedded model as policy and as helper.

The helper plays the weather service's tools and judges the episodes (TRUSTEE-style); the trained
token chain holds the simulated tool results as environment text, never as policy tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arena.env.registry import Registry
from arena.episode.runner import EpisodeConfig
from arena.types import SamplingParams
from trainer.grpo import train_round
from trainer.metrics import StepMetrics

from .tiny import simulated_weather_task, tiny_config

pytestmark = [pytest.mark.model, pytest.mark.slow]


def calling_config() -> Any:
    """Two turns, each with a schema-valid tool call: every episode reaches the simulated tools."""
    params = SamplingParams(temperature=1.0, logprobs=True, constrain_tool_calls=True, require_tool_call=True)
    episode = EpisodeConfig(max_turns=2, max_tokens_per_turn=64, max_total_tokens=4096, params=params)
    return tiny_config(episode=episode, drop_zero_variance=False, group_size=2)


@pytest.mark.anyio
async def test_a_grpo_step_trains_on_simulated_episodes_without_their_tool_results(
    embedded_model_path: Path, tmp_path: Path, recorded_rollouts: list[Any]
) -> None:
    from simulate.local import LocalChatModel

    helper = LocalChatModel.load(embedded_model_path, device="cpu")
    envs = {"weather": Registry().load_all()["weather"]}
    seen: list[StepMetrics] = []
    result = await train_round(
        0,
        [simulated_weather_task()],
        embedded_model_path,
        tmp_path,
        calling_config(),
        on_step=seen.append,
        envs=envs,
        simulator=helper,
    )
    assert result.steps == 1 and len(seen) == 1 and seen[0].finite()
    [(out, batch)] = recorded_rollouts
    assert batch.keys == [simulated_weather_task().full_id] * 2  # the step's batch: simulated episodes
    simulated_results = forced = 0
    for i, (transcript, verdict) in enumerate(batch.episodes):
        meta = transcript.metadata["simulator"]
        assert meta["model"] and verdict.checks and verdict.checks[0].kind == "rubric"
        chain = transcript.chains[0]
        mask = out["env_mask"][i]
        assert out["completion_ids"][i] == chain.completion_ids() and len(mask) == len(chain.completion_ids())
        position = 0
        for segment in chain.segments[1:]:
            span = mask[position : position + len(segment.token_ids)]
            if segment.kind == "policy":  # the policy's own choices; what the call grammar forced is not
                assert span == [0 if j in segment.forced else 1 for j in range(len(segment.token_ids))]
                forced += len(segment.forced)
            else:  # tool results (the helper's text) and template glue: never trained
                assert span == [0] * len(segment.token_ids)
            position += len(segment.token_ids)
        assert position == len(mask)
        # Every simulated result the policy was shown sits in the masked part of its chain.
        context = helper.tokenizer.decode(
            [t for t, m in zip(chain.completion_ids(), mask, strict=True) if m == 0]
        )
        # (Results after the last policy turn end the episode: no later prompt shows them.)
        last_turn = max(j for j, m in enumerate(transcript.messages) if m.role == "assistant")
        for message in transcript.messages[:last_turn]:
            if message.role == "tool" and message.content:
                simulated_results += 1
                assert message.content[:40] in context
    assert simulated_results > 0, "no episode got a simulated tool result"
    assert forced > 0, "required tool calls: the grammar forced their fixed JSON"
    # The per-task outcome the curriculum hears about is the simulated environment's.
    [outcome] = result.task_outcomes
    assert outcome.env == "weather" and outcome.episodes == 2


@pytest.mark.anyio
async def test_simulated_tasks_without_the_helper_are_refused(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    envs = {"weather": Registry().load_all()["weather"]}
    with pytest.raises(ValueError, match="need the helper as simulator"):
        await train_round(
            0, [simulated_weather_task()], embedded_model_path, tmp_path, calling_config(), envs=envs
        )
