"""TrainerConfig: defaults follow DAPO, and bad combinations fail with a message naming the problem."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainer.config import PublishConfig, TrainerConfig


def test_defaults_are_dapo_clipping_without_kl() -> None:
    config = TrainerConfig()
    assert (config.epsilon, config.epsilon_high, config.beta, config.loss_type) == (0.2, 0.28, 0.0, "dapo")
    assert config.drop_zero_variance and config.sft.enabled
    assert config.batch_size == config.tasks_per_step * config.group_size
    assert config.batch_size % config.micro_batch == 0


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"epsilon": 0.3, "epsilon_high": 0.2}, "epsilon_high"),
        ({"group_size": 3, "tasks_per_step": 1, "micro_batch_size": 2}, "micro_batch_size"),
        ({"rollout_backend": "http"}, "rollout_base_url"),
        ({"group_size": 1}, "group_size"),
    ],
)
def test_bad_combinations_are_rejected(update: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TrainerConfig(**update)


def test_http_publishing_needs_a_server_and_a_shared_folder() -> None:
    with pytest.raises(ValidationError, match="base_url and shared_dir"):
        PublishConfig(kind="http", base_url="http://vllm:8000")


def test_with_sampling_changes_only_the_episode_sampling() -> None:
    base = TrainerConfig()
    hot = base.with_sampling(temperature=1.3, logprobs=False)
    assert hot.episode.params.temperature == 1.3 and not hot.episode.params.logprobs
    assert hot.episode.max_turns == base.episode.max_turns and hot.group_size == base.group_size
    assert base.episode.params.temperature == 1.0 and base.episode.params.logprobs  # a copy
