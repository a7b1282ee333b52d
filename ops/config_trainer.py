"""The `[trainer]` table: `trainer.config.TrainerConfig` itself, with what the daemon fills in.

The daemon's settings validate `[trainer]` into the trainer's own model (one class, one name per
knob). A few of its fields are not settings: the daemon derives them from its other sections
(`SET_ELSEWHERE` says from which), so the table refuses them rather than ignoring them, and:

- `settings_input` fills them in when the configuration loads, so the trainer's own checks (an
  http rollout backend needs its server, a batch must split over the processes) see the values a
  round will use and a bad combination stops start-up;
- `for_round` fills them in again for one round (`model_copy`): the seed moves with the round,
  EVALUATE samples at temperature 0, and the policy server's API key is added only here, so the
  loaded configuration never holds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arena.episode.runner import EpisodeConfig
from arena.types import SamplingParams
from trainer.config import TrainerConfig

if TYPE_CHECKING:
    from ops.config_sections import RoundConfig

# Trainer fields (dotted below the table) -> what sets them instead of `[trainer]`.
SET_ELSEWHERE: dict[str, str] = {
    "group_size": "round.samples_per_task",
    "max_steps": "round.train_steps",
    "save_every": "round.train_steps (a checkpoint at the end of each round)",
    "micro_batch_size": "the step's batch (2 completions a pass when it is even, else 1)",
    "seed": "daemon.seed plus the round number",
    "episode": "round.max_turns, round.max_tokens_per_turn and round.constrain_tool_calls",
    "rollout_concurrency": "round.episode_concurrency",
    "rollout_base_url": "models.policy.base_url",
    "rollout_replica_urls": "models.policy.replica_urls",
    "rollout_model": "models.policy.model",
    "rollout_api_key": "models.policy.api_key",
    "sft.max_length": "round.max_turns and round.max_tokens_per_turn (the episode's token budget)",
    "reward": "arena.tasks.reward's rules (not configurable)",
    "publish": "models.policy and trainer.publish_dir (the daemon's own publisher)",
}
# The same as dotted configuration keys: what the reference docs and `arena config show` leave out.
NOT_SETTINGS: frozenset[str] = frozenset(f"trainer.{key}" for key in SET_ELSEWHERE)


def round_values(
    rnd: RoundConfig, policy: Any, *, seed: int, tasks_per_step: int, http: bool, temperature: float = 1.0
) -> dict[str, Any]:
    """The trainer fields a round derives from `[round]`, `models.policy` and its seed (no API key).

    `sft.max_length` is `episode.max_total_tokens`: a trajectory the episode budget allows is one
    the warm-up can imitate.
    """
    group = max(2, rnd.samples_per_task)
    episode = EpisodeConfig(
        max_turns=rnd.max_turns,
        max_tokens_per_turn=rnd.max_tokens_per_turn,
        max_total_tokens=max(rnd.max_tokens_per_turn * rnd.max_turns, rnd.max_tokens_per_turn) + 4096,
        params=SamplingParams(
            temperature=temperature,
            top_p=1.0,
            max_tokens=rnd.max_tokens_per_turn,
            logprobs=temperature > 0,
            constrain_tool_calls=rnd.constrain_tool_calls,
        ),
    )
    values: dict[str, Any] = {
        "group_size": group,
        # Two completions per forward/backward pass when that divides the step's batch (CPU memory).
        "micro_batch_size": 2 if (tasks_per_step * group) % 2 == 0 else 1,
        "max_steps": max(1, rnd.train_steps),
        "save_every": max(1, rnd.train_steps),
        "seed": seed,
        "episode": episode,
        "rollout_concurrency": max(1, rnd.episode_concurrency),
    }
    if http:
        values |= {
            "rollout_base_url": policy.base_url,
            "rollout_replica_urls": list(policy.replica_urls),
            "rollout_model": policy.model,
        }
    return values


def _set_elsewhere(raw: Mapping[str, Any]) -> list[str]:
    found = []
    for key in SET_ELSEWHERE:
        head, _, leaf = key.partition(".")
        node = raw.get(head)
        if (not leaf and head in raw) or (leaf and isinstance(node, Mapping) and leaf in node):
            found.append(key)
    return found


def _tasks_per_step(raw: Mapping[str, Any]) -> int:
    value = raw.get("tasks_per_step", TrainerConfig.model_fields["tasks_per_step"].default)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 1  # not a number: the trainer's own validation names the key


def settings_input(raw: Any, sections: Mapping[str, Any]) -> Any:
    """The `[trainer]` table with the derived fields filled in from the already-validated `sections`.

    Refuses a table that sets a derived field, naming what sets it; a `TrainerConfig` is taken as
    the fields it was given. Sections that failed their own validation are missing: their errors
    are reported, and the table is passed on unfilled.
    """
    if isinstance(raw, TrainerConfig):
        raw = raw.model_dump(exclude_unset=True)
    if not isinstance(raw, Mapping):
        return raw
    refused = _set_elsewhere(raw)
    if refused:
        raise ValueError(
            "; ".join(f"trainer.{key} is not a setting: {SET_ELSEWHERE[key]} sets it" for key in refused)
        )
    rnd, models, daemon = sections.get("round"), sections.get("models"), sections.get("daemon")
    if rnd is None or models is None or daemon is None:
        return raw
    http = raw.get("rollout_backend") == "http"
    if http and models.policy.backend != "http":
        raise ValueError("rollout_backend = 'http' needs models.policy.backend = 'http' (the server)")
    values = round_values(
        rnd, models.policy, seed=daemon.seed, tasks_per_step=_tasks_per_step(raw), http=http
    )
    sft = raw.get("sft", {})
    if isinstance(sft, Mapping):
        values["sft"] = {**sft, "max_length": values["episode"].max_total_tokens}
    return {**raw, **values}


def check_with_models(trainer: TrainerConfig, models: Any) -> None:
    """What the trainer needs from the daemon's other settings; raises ValueError naming the key."""
    if models is not None and models.policy.backend == "http" and trainer.base_model is None:
        # Without it the trainer would start from the embedded model, not from what the server serves.
        raise ValueError("base_model (the folder of the weights the http policy server serves) is needed")
    if trainer.rollout_backend == "http" and trainer.publish_dir is None:
        raise ValueError("rollout_backend = 'http' needs publish_dir (where the server reads updates)")
    if trainer.sharding == "fsdp" and trainer.sft.enabled:
        raise ValueError(
            "the SFT warm-up trains in the daemon's one process, where a model that needs FSDP does not "
            "fit: set sft.enabled = false with sharding = 'fsdp'"
        )


def for_round(
    trainer: TrainerConfig, rnd: RoundConfig, policy: Any, *, seed: int, temperature: float = 1.0
) -> TrainerConfig:
    """`trainer` with one round's derived fields (the seed, the sampling temperature, the API key).

    Validated again, so a batch that does not split over the processes is refused here too.
    """
    http = trainer.rollout_backend == "http"
    values = round_values(
        rnd, policy, seed=seed, tasks_per_step=trainer.tasks_per_step, http=http, temperature=temperature
    )
    if http:
        values["rollout_api_key"] = policy.api_key_value()
    values["sft"] = trainer.sft.model_copy(update={"max_length": values["episode"].max_total_tokens})
    return TrainerConfig.model_validate(trainer.model_copy(update=values).model_dump())


def settings_dump(data: dict[str, Any]) -> dict[str, Any]:
    """A dumped `ArenaConfig` (JSON data) without the trainer fields that are not settings."""
    trainer = dict(data.get("trainer", {}))
    for key in SET_ELSEWHERE:
        head, _, leaf = key.partition(".")
        if not leaf:
            trainer.pop(head, None)
        elif isinstance(trainer.get(head), dict):
            trainer[head] = {k: v for k, v in trainer[head].items() if k != leaf}
    return {**data, "trainer": trainer}
