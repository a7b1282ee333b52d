"""The sections of Arena's configuration (`[data]`, `[store]`, `[models.policy]`, …) and their defaults.

`ops.config.ArenaConfig` puts them together and loads them from the TOML file and the environment;
each field's description says what it does (`arena config show` prints the effective values).
A section a lower package reads is that package's own model, composed here, not a copy of it:
`[models.*]` is `simulate.backends.ModelSpec`, `[curriculum]` `curriculum.state.CurriculumConfig`,
`[diagnosis]` `diagnose.config.DiagnosisConfig`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from arena.sandbox.models import SandboxLimits
from simulate.backends import ModelSpec, server_key


class ConfigSection(BaseModel):
    """A configuration table: unknown keys are refused."""

    # Unknown keys are typos more often than not: refuse them so they are not silently ignored.
    model_config = ConfigDict(extra="forbid", validate_default=True)


class DataConfig(ConfigSection):
    """Where Arena keeps its state."""

    dir: Path = Field(Path("./var"), description="Store, checkpoints and caches (ARENA_DATA_DIR).")
    env_path: list[Path] = Field(
        default_factory=list, description="Extra environment folders (ARENA_ENV_PATH, ':'-separated)."
    )

    @field_validator("env_path", mode="before")
    @classmethod
    def _split_path(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [p for p in value.split(":") if p]
        return value


class AdminConfig(ConfigSection):
    """The admin HTTP API (also serves /metrics)."""

    address: str = Field("127.0.0.1:8787", description="host:port of the admin API.")
    token: SecretStr | None = Field(None, description="Bearer token for POST endpoints (ARENA_ADMIN_TOKEN).")

    @field_validator("address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"{value!r} is not host:port (e.g. 127.0.0.1:8787)")
        return value

    @property
    def host(self) -> str:
        """The host part, without IPv6 brackets."""
        return self.address.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        """The port part."""
        return int(self.address.rpartition(":")[2])


class DaemonConfig(ConfigSection):
    """The round loop."""

    grace_period_s: float = Field(30.0, gt=0, description="SIGTERM: time to finish the current step.")
    last_round: int | None = Field(None, ge=1, description="Stop after completing this round (none: run on).")
    retry_backoff_s: float = Field(5.0, ge=0, description="First wait before retrying a failed phase.")
    max_phase_failures: int = Field(3, ge=1, description="Consecutive failures before the daemon pauses.")
    readiness_interval_s: float = Field(10.0, gt=0, description="How often the model backends are probed.")
    seed: int = Field(0, description="Base seed; each round derives its own.")


class ModelsConfig(ConfigSection):
    """The trained policy and the helper (simulators, judge, task writer, diagnosis)."""

    policy: ModelSpec = Field(default_factory=ModelSpec)
    helper: ModelSpec = Field(default_factory=ModelSpec)

    @model_validator(mode="after")
    def _helper_is_not_the_policy_server(self) -> ModelsConfig:
        # Every publish reloads the policy server's weights (every replica's): a helper served there
        # would become the trained policy, simulating tools and users and judging answers for itself.
        if self.policy.backend != "http" or self.helper.backend != "http":
            return self
        for key, url in [
            ("base_url", self.helper.base_url),
            *(("replica_urls", u) for u in self.helper.replica_urls),
        ]:
            if any(server_key(url) == server_key(p) for p in self.policy.urls):
                raise ValueError(
                    f"helper.{key} is the policy server ({url}): each publish would load "
                    "the trained policy into the helper; serve the helper from a server of its own"
                )
        return self


class RoundConfig(ConfigSection):
    """Sizes of one round."""

    eval_envs_per_category: int = Field(2, ge=1, description="K arena environments per top-level category.")
    eval_tasks_per_env: int = Field(4, ge=1, description="Fresh evaluation tasks per arena environment.")
    eval_samples_per_task: int = Field(1, ge=1, le=64, description="Samples per evaluation task.")
    samples_per_task: int = Field(4, ge=1, le=64, description="G: samples per training task (GRPO group).")
    train_steps: int = Field(8, ge=0, description="Optimizer steps per round.")
    max_turns: int = Field(10, ge=1, description="Turn cap of one episode.")
    max_tokens_per_turn: int = Field(256, ge=1, description="Token cap of one policy turn.")
    episode_concurrency: int = Field(4, ge=1, description="Episodes run at once.")
    constrain_tool_calls: bool = Field(
        False,
        description="Grammar-constrain the policy's tool calls to the shown tools' schemas "
        "(local: xgrammar; http: strict functions).",
    )
    eval_max_envs: int | None = Field(
        None, ge=1, description="Evaluate at most this many arena environments per round (none: all)."
    )
    eval_simulated: bool = Field(
        True, description="Also evaluate simulated arena environments (helper-played)."
    )
    yardstick_tasks_per_level: int = Field(
        2,
        ge=0,
        le=64,
        description="Yardstick tasks per arena environment and level (easy, medium, hard): drawn once, "
        "never trained on, run greedily with every tool each round (0: no yardstick).",
    )
    yardstick_caps: Literal["fit", "round"] = Field(
        "fit",
        description="Turn and token caps of a yardstick episode. fit: each task gets its reference's calls plus "
        "two turns and room for its longest call, at least max_turns and max_tokens_per_turn (a task the caps cut "
        "short measures the caps, not the policy); round: max_turns and max_tokens_per_turn for every task.",
    )
    yardstick_after_warmup: bool = Field(
        False,
        description="TRAIN also measures the policy right after its SFT warm-up on the yardstick, so a "
        "round's change splits into the warm-up's share and GRPO's (arena report; arena bench learn sets it).",
    )


class SynthesisConfig(ConfigSection):
    """Task synthesis."""

    tasks_per_weak_env: int = Field(
        4,
        ge=0,
        description="Targeted tasks per training env a weak motif maps onto, within its budget (0: none).",
    )
    max_attempts: int = Field(3, ge=1, description="Generation attempts per task before giving up.")
    complexify_db: bool = Field(
        True, description="Grow one training env's database per round when the diagnosis points at scale."
    )
    complexify_rows: int = Field(20, ge=0, description="Rows a round's complexification adds (0: none).")
    new_envs_per_round: int = Field(
        1,
        ge=0,
        description="Environments SYNTHESIZE may build per round (on the helper) for a weak category or "
        "motif no training env covers (0: off).",
    )
    new_env_max_tries: int = Field(
        3, ge=1, le=10, description="Tries per step of building a new environment before giving up."
    )
    writer: Literal["template", "model"] = Field(
        "template", description="Instruction writer: template (no model call) or model (the helper)."
    )


class SimulationConfig(ConfigSection):
    """Simulated environments: when the helper's simulation may be trained on.

    PLAN's gate (`ops.phases.simulated_training_gate`) over the helper's stored fidelity, never
    seen by a simulator: not `simulate.simenv.SimulationSettings`, which is each simulator's
    sampling, stored with every simulated episode.
    """

    max_false_pass: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="Simulated envs get training budget only while the helper's measured judge "
        "false-pass rate (`arena bench sim --save`) is below this; 1: always, even unmeasured.",
    )


class SandboxConfig(SandboxLimits):
    """Where untrusted code runs: which environments, how many workers, and each job's limits.

    The limits are `arena.sandbox.SandboxLimits` itself (one definition, its bounds and defaults);
    this table adds what only the daemon decides.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    mode: Literal["synthesized", "all"] = Field(
        "synthesized", description="'all' sandboxes every environment (ARENA_SANDBOX)."
    )
    workers: int = Field(2, ge=1, description="Sandbox worker processes.")


class LoggingConfig(ConfigSection):
    """Log output."""

    level: Literal["debug", "info", "warning", "error"] = Field("info", description="Minimum level.")
    format: Literal["auto", "json", "console"] = Field(
        "auto", description="auto: console on a terminal, JSON lines otherwise."
    )

    @field_validator("level", "format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value
