"""Arena's configuration: one TOML file plus `ARENA_*` environment variables.

Precedence, lowest first: the defaults documented on the models below, the TOML file (`--config`
or `ARENA_CONFIG`), then environment variables. Every key can be set from the environment as
`ARENA_<SECTION>__<KEY>` (nested keys joined with `__`, e.g. `ARENA_MODELS__POLICY__BACKEND`);
a few names are fixed because operators and manifests rely on them (see `FIXED_ENV`).

A bad value is reported as a `ConfigError` naming the key (and the variable or file it came from)
and why, never as a traceback.

Why the environment overlay is written here rather than through pydantic-settings (tried: 2.x,
`env_prefix="ARENA_"`, `env_nested_delimiter="__"`, `extra="forbid"`): it ignores a variable whose
section is misspelt (`ARENA_SECTON__KEY=1` loads the defaults without a word), its errors name the
key but not the variable or file the value came from, and the fixed names (`ARENA_DATABASE_URL` for
`store.url`) would need aliases on the lower packages' own models, which must not know Arena's
variables. The overlay is the dozen lines of `env_overrides`; pydantic validates everything.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from curriculum.state import CurriculumConfig
from diagnose.config import DiagnosisConfig
from ops.config_cluster import ClusterConfig
from ops.config_public import PublicConfig
from ops.config_sections import (
    AdminConfig,
    ConfigSection,
    DaemonConfig,
    DataConfig,
    LoggingConfig,
    ModelsConfig,
    RoundConfig,
    SandboxConfig,
    SimulationConfig,
    SynthesisConfig,
)
from ops.config_store import StoreConfig
from ops.config_trainer import check_with_models, settings_input
from trainer.config import TrainerConfig

ENV_PREFIX = "ARENA_"
# Fixed variable names -> dotted config keys (DESIGN §8); these win over the generic form.
FIXED_ENV: dict[str, str] = {
    "ARENA_DATA_DIR": "data.dir",
    "ARENA_DATABASE_URL": "store.url",
    "ARENA_ENV_PATH": "data.env_path",
    "ARENA_ADMIN_TOKEN": "admin.token",
    "ARENA_SANDBOX": "sandbox.mode",
    "ARENA_RAY_ADDRESS": "cluster.address",
}
# ARENA_* variables that are not configuration keys (the file itself, test harness knobs).
NON_CONFIG_ENV = {"ARENA_CONFIG"}
REDACTED = "**********"
# Keys renamed since an earlier release -> their new names: a file or variable still using the old
# name is refused with the new one named, rather than a bare "unknown key".
RENAMED_KEYS: dict[str, str] = {
    "curriculum.cheap_share": "curriculum.simulated_share",
    # The daemon's own names for the trainer's knobs, before `[trainer]` became `trainer.config.TrainerConfig`.
    "trainer.kl_beta": "trainer.beta",
    "trainer.clip_low": "trainer.epsilon",
    "trainer.clip_high": "trainer.epsilon_high",
    "trainer.batch_size": "trainer.tasks_per_step",  # episodes per step -> groups per step
    "trainer.keep_checkpoints": "trainer.keep_last",
    "trainer.use_lora": "trainer.lora.enabled",
    "trainer.lora_sync": "trainer.weight_sync",
    "trainer.sft_warmup": "trainer.sft.enabled",
    "trainer.sft_epochs": "trainer.sft.epochs",
    "trainer.sft_learning_rate": "trainer.sft.learning_rate",
    "trainer.rollouts": "trainer.rollout_backend",  # policy_server -> http
}
# Renamed keys whose values changed too: the refusal says how, so an old value is not copied as it is.
RENAMED_VALUES: dict[str, str] = {
    "trainer.batch_size": "it counted episodes, the new key counts groups: divide by round.samples_per_task",
    "trainer.rollouts": "'policy_server' is now 'http'",
}
# Keys that hold secrets -> the variable that should carry them: `arena config show` never writes
# their values into a file (store.url only when it has a password).
SECRET_ENV: dict[str, str] = {
    "store.url": "ARENA_DATABASE_URL",
    "admin.token": "ARENA_ADMIN_TOKEN",
    "models.policy.api_key": "ARENA_MODELS__POLICY__API_KEY",
    "models.helper.api_key": "ARENA_MODELS__HELPER__API_KEY",
}


class ConfigError(ValueError):
    """The configuration is invalid; the message names every bad key and why."""


class ArenaConfig(ConfigSection):
    """The whole configuration."""

    data: DataConfig = Field(default_factory=DataConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    admin: AdminConfig = Field(default_factory=AdminConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    round: RoundConfig = Field(default_factory=RoundConfig)
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    synthesis: SynthesisConfig = Field(default_factory=SynthesisConfig)
    simulation: SimulationConfig = Field(default_factory=SimulationConfig)
    diagnosis: DiagnosisConfig = Field(default_factory=DiagnosisConfig)
    # Validated even when absent, so the fields derived from the sections above are filled in.
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, validate_default=True)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    public: PublicConfig = Field(default_factory=PublicConfig)

    @field_validator("diagnosis")
    @classmethod
    def _room_for_the_report(cls, diagnosis: DiagnosisConfig) -> DiagnosisConfig:
        # The report's schema is sized to the per-call cap: below 800 tokens the daemon's agent
        # could not answer with one (`diagnose` itself allows less, for tests of a cut-off answer).
        if diagnosis.max_tokens_per_call < 800:
            raise ValueError(
                f"max_tokens_per_call is {diagnosis.max_tokens_per_call}; it must be at least 800"
            )
        return diagnosis

    @field_validator("trainer", mode="before")
    @classmethod
    def _trainer_values_from_other_sections(cls, value: Any, info: ValidationInfo) -> Any:
        return settings_input(value, info.data)

    @field_validator("trainer")
    @classmethod
    def _http_policy_needs_weights_and_a_publish_dir(
        cls, trainer: TrainerConfig, info: ValidationInfo
    ) -> TrainerConfig:
        check_with_models(trainer, info.data.get("models"))
        return trainer

    @field_validator("cluster")
    @classmethod
    def _cluster_mode_needs_postgresql(cls, cluster: ClusterConfig, info: ValidationInfo) -> ClusterConfig:
        store = info.data.get("store")
        if cluster.backend == "ray" and store is not None and not (store.url or "").startswith("postgresql"):
            # Workers on other machines commit nothing themselves, but the daemon that does must
            # survive its host: a SQLite file on one node is neither shared nor safe to fail over.
            where = store.url or "the SQLite file in data.dir (no store.url)"
            raise ValueError(
                f"backend = 'ray' needs a PostgreSQL store (store.url / ARENA_DATABASE_URL = "
                f"postgresql://...); the store is {where}"
            )
        return cluster

    @property
    def envs_dir(self) -> Path:
        """`DATA_DIR/envs`: imported environments and the ones SYNTHESIZE built, loaded every phase."""
        return Path(self.data.dir).expanduser().absolute() / "envs"

    @property
    def public_dir(self) -> Path:
        """`DATA_DIR/public`: imported public benchmarks (`arena envs import-bfcl`), never trained on."""
        return Path(self.data.dir).expanduser().absolute() / "public"

    @property
    def database_url(self) -> str:
        """The effective store URL: the configured one, else a SQLite file in the data dir."""
        if self.store.url:
            return self.store.url
        return f"sqlite+aiosqlite:///{(self.data.dir / 'arena.db').resolve()}"

    def redacted(self) -> dict[str, Any]:
        """The effective configuration as plain JSON data, secrets replaced by asterisks."""
        data = self.model_dump(mode="json")
        data["store"]["url"] = _redact_url(self.database_url)
        data["admin"]["token"] = REDACTED if self.admin.token else None
        for role in ("policy", "helper"):
            if getattr(self.models, role).api_key is not None:
                data["models"][role]["api_key"] = REDACTED
        return data


def _redact_url(url: str) -> str:
    # postgresql+asyncpg://user:secret@host/db -> user:**********@host
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in creds:
        return url
    return f"{scheme}://{creds.split(':', 1)[0]}:{REDACTED}@{host}"


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    node = target
    *parents, leaf = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value


def _known_key(dotted: str) -> bool:
    model: Any = ArenaConfig
    for part in dotted.split("."):
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return False
        model = fields[part].annotation
    return True


def _env_value(raw: str) -> Any:
    # Lists and tables can be given as JSON; everything else is left to pydantic's coercion.
    stripped = raw.strip()
    if stripped.startswith(("[", "{")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw


def _renamed(old: str) -> str:
    new = RENAMED_KEYS[old]
    note = f"; {RENAMED_VALUES[old]}" if old in RENAMED_VALUES else ""
    return f"{old!r} was renamed to {new!r} ({ENV_PREFIX}{new.upper().replace('.', '__')}){note}"


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted config key -> the environment variable that sets it. Unknown `ARENA_X__Y` names fail."""
    found: dict[str, str] = {}
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in NON_CONFIG_ENV or name in FIXED_ENV:
            continue
        rest = name[len(ENV_PREFIX) :]
        if "__" not in rest:
            continue  # not a config key (e.g. ARENA_TEST_PG_URL)
        dotted = ".".join(part.lower() for part in rest.split("__"))
        if dotted in RENAMED_KEYS:
            raise ConfigError(f"{name}: {_renamed(dotted)}")
        if not _known_key(dotted):
            raise ConfigError(f"{name}: no configuration key {dotted!r}")
        found[dotted] = name
    for name, dotted in FIXED_ENV.items():
        if name in environ:
            found[dotted] = name
    return found


def load_config(path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> ArenaConfig:
    """Load the effective configuration (defaults < TOML file < environment); raise `ConfigError`."""
    env = os.environ if environ is None else environ
    if path is None and env.get("ARENA_CONFIG"):
        path = env["ARENA_CONFIG"]
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        file = Path(path)
        source = str(file)
        try:
            data = tomllib.loads(file.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{file}: configuration file not found") from None
        except OSError as exc:
            raise ConfigError(f"{file}: cannot read ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file}: not valid TOML ({exc})") from None
    origins: dict[str, str] = {}
    for dotted, name in env_overrides(env).items():
        _set_dotted(data, dotted, _env_value(env[name]))
        origins[dotted] = name
    try:
        return ArenaConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins, source)) from None


def _describe(exc: ValidationError, origins: dict[str, str], source: str) -> str:
    lines = []
    for err in exc.errors():
        dotted = ".".join(str(p) for p in err["loc"])
        origin = next(
            (
                v
                for k, v in origins.items()
                if dotted == k or dotted.startswith(k + ".") or k.startswith(dotted + ".")
            ),
            source,
        )
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = _renamed(dotted) if dotted in RENAMED_KEYS else "unknown key"
        lines.append(f"{dotted}: {message} (from {origin})")
    return "invalid configuration: " + "; ".join(lines)
