"""Configuration: TOML, ARENA_* overrides, fixed names, bad values naming their key, redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.cli import main
from ops.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]


def test_toml_then_env_overrides(tmp_path: Path) -> None:
    file = tmp_path / "arena.toml"
    file.write_text(
        '[models.policy]\nbackend = "http"\nbase_url = "http://vllm:8000/v1"\nconcurrency = 8\n'
        '[trainer]\nbase_model = "/srv/models/policy"\n'
        "[round]\nsamples_per_task = 6\n"
    )
    env = {
        "ARENA_MODELS__POLICY__CONCURRENCY": "32",
        "ARENA_DATA_DIR": str(tmp_path / "data"),
        "ARENA_ENV_PATH": f"{tmp_path}/a:{tmp_path}/b",
        "ARENA_ADMIN_TOKEN": "tok",
        "ARENA_TEST_PG_URL": "ignored: not a config key",
        "ARENA_LOGGING__LEVEL": "DEBUG",
    }
    config = load_config(file, environ=env)
    assert config.models.policy.backend == "http" and config.models.policy.concurrency == 32
    assert config.round.samples_per_task == 6 and config.round.eval_envs_per_category == 2  # default
    assert config.data.env_path == [tmp_path / "a", tmp_path / "b"]
    assert config.database_url == f"sqlite+aiosqlite:///{(tmp_path / 'data' / 'arena.db').resolve()}"
    assert config.admin.token is not None and config.admin.token.get_secret_value() == "tok"
    assert config.admin.address == "127.0.0.1:8787" and config.logging.level == "debug"
    # ARENA_CONFIG names the file when --config is not given.
    assert load_config(environ={"ARENA_CONFIG": str(file)}).models.policy.concurrency == 8


def test_local_model_dtype_reaches_the_backend_spec(tmp_path: Path) -> None:
    config = load_config(environ={"ARENA_MODELS__HELPER__DTYPE": "bfloat16"})
    assert config.models.helper.dtype == "bfloat16"
    assert config.models.policy.dtype is None  # float32 on CPU, bfloat16 on GPU
    with pytest.raises(ConfigError, match=r"models\.policy\.dtype"):
        load_config(environ={"ARENA_MODELS__POLICY__DTYPE": "float16"})


def test_database_url_forms() -> None:
    config = load_config(environ={"ARENA_DATABASE_URL": "postgresql://arena:pw@db:5432/arena"})
    assert config.database_url == "postgresql+asyncpg://arena:pw@db:5432/arena"
    assert config.redacted()["store"]["url"] == "postgresql+asyncpg://arena:**********@db:5432/arena"


@pytest.mark.parametrize(
    ("env", "file_text", "expected"),
    [
        (
            {"ARENA_MODELS__POLICY__CONCURRENCY": "zero"},
            "",
            "models.policy.concurrency: Input should be a valid integer",
        ),
        ({"ARENA_MODELS__HELPER__BACKEND": "grpc"}, "", "models.helper.backend"),
        ({"ARENA_ADMIN__ADDRESS": "nowhere"}, "", "admin.address: 'nowhere' is not host:port"),
        ({"ARENA_DATABASE_URL": "mysql://x"}, "", "store.url: must be a sqlite+aiosqlite:// or postgresql"),
        ({"ARENA_ROUNDS__K": "3"}, "", "ARENA_ROUNDS__K: no configuration key 'rounds.k'"),
        ({}, "[round]\nsampels_per_task = 3\n", "round.sampels_per_task: unknown key"),
        # A key renamed since an earlier release names its new name, from a file or a variable.
        (
            {},
            "[curriculum]\ncheap_share = 0.5\n",
            "curriculum.cheap_share: 'curriculum.cheap_share' was renamed to 'curriculum.simulated_share' "
            "(ARENA_CURRICULUM__SIMULATED_SHARE)",
        ),
        (
            {"ARENA_CURRICULUM__CHEAP_SHARE": "0.5"},
            "",
            "ARENA_CURRICULUM__CHEAP_SHARE: 'curriculum.cheap_share' was renamed to 'curriculum.simulated_share'",
        ),
        # The daemon's old names for the trainer's knobs ([trainer] is trainer.config.TrainerConfig).
        (
            {},
            "[trainer]\nkl_beta = 0.1\n",
            "trainer.kl_beta: 'trainer.kl_beta' was renamed to 'trainer.beta' (ARENA_TRAINER__BETA)",
        ),
        (
            {"ARENA_TRAINER__USE_LORA": "true"},
            "",
            "ARENA_TRAINER__USE_LORA: 'trainer.use_lora' was renamed to 'trainer.lora.enabled' "
            "(ARENA_TRAINER__LORA__ENABLED)",
        ),
        # A renamed key whose unit changed says how to convert, so the old value is not copied as it is.
        (
            {},
            "[trainer]\nbatch_size = 8\n",
            "trainer.batch_size: 'trainer.batch_size' was renamed to 'trainer.tasks_per_step' "
            "(ARENA_TRAINER__TASKS_PER_STEP); it counted episodes, the new key counts groups: "
            "divide by round.samples_per_task",
        ),
        # What the daemon derives from other sections is refused in [trainer], not ignored.
        (
            {},
            "[trainer]\ngroup_size = 8\n",
            "trainer: trainer.group_size is not a setting: round.samples_per_task sets it",
        ),
        (
            {"ARENA_TRAINER__SFT__MAX_LENGTH": "512"},
            "",
            "trainer: trainer.sft.max_length is not a setting: round.max_turns and round.max_tokens_per_turn",
        ),
        (
            {},
            "[trainer]\nepsilon = 0.3\nepsilon_high = 0.25\n",
            "trainer: epsilon_high (0.25) must be >= epsilon",
        ),
        (
            {},
            '[models.policy]\nbackend = "http"\nbase_url = "http://vllm:8000/v1"\n'
            '[trainer]\nbase_model = "/m"\npublish_dir = "/p"\nrollout_backend = "http"\n'
            'processes = 2\nsharding = "fsdp"\n',
            "trainer: the SFT warm-up trains in the daemon's one process, where a model that needs FSDP "
            "does not fit: set sft.enabled = false with sharding = 'fsdp'",
        ),
        ({}, "[round\n", "not valid TOML"),
        (
            {},
            '[models.policy]\nbackend = "http"\nbase_url = "http://vllm:8000/v1"\n'
            '[models.helper]\nbackend = "http"\nbase_url = "http://VLLM:8000/"\n',
            "models: helper.base_url is the policy server (http://VLLM:8000/): each publish would load",
        ),
        (
            {"ARENA_TRAINER__ROLLOUT_BACKEND": "http"},
            "",
            "trainer: rollout_backend = 'http' needs models.policy.backend = 'http'",
        ),
        (
            {},
            '[models.policy]\nbackend = "http"\nbase_url = "http://vllm:8000/v1"\n',
            "trainer: base_model (the folder of the weights the http policy server serves) is needed",
        ),
        (
            {"ARENA_TRAINER__ROLLOUT_BACKEND": "http"},
            '[models.policy]\nbackend = "http"\nbase_url = "http://vllm:8000/v1"\n'
            '[trainer]\nbase_model = "/srv/models/policy"\n',
            "trainer: rollout_backend = 'http' needs publish_dir",
        ),
    ],
)
def test_bad_values_name_their_key(
    tmp_path: Path, env: dict[str, str], file_text: str, expected: str
) -> None:
    file = tmp_path / "bad.toml"
    file.write_text(file_text)
    with pytest.raises(ConfigError) as err:
        load_config(file, environ=env)
    assert expected in str(err.value)
    for name in env:
        if "__" in name or name == "ARENA_DATABASE_URL":
            assert name in str(err.value)  # says where the bad value came from


def test_config_show_redacts_and_examples_load(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("ARENA_ADMIN_TOKEN", "topsecret")
    monkeypatch.setenv("ARENA_MODELS__HELPER__API_KEY", "sk-hidden")
    for example in sorted((REPO / "config").glob("*.toml")):
        assert main(["config", "show", "--json", "--config", str(example)]) == 0, example
        out = capsys.readouterr().out
        data = json.loads(out)
        assert "topsecret" not in out and "sk-hidden" not in out
        assert data["admin"]["token"] == "**********"
    assert main(["config", "show"]) == 0
    assert "[models.policy]" in capsys.readouterr().out
    monkeypatch.setenv("ARENA_ROUND__SAMPLES_PER_TASK", "-1")
    assert main(["config", "show"]) == 2
    assert "round.samples_per_task" in capsys.readouterr().err


SECRETS = {
    "ARENA_ADMIN_TOKEN": "topsecret",
    "ARENA_MODELS__HELPER__API_KEY": "sk-hidden",
    "ARENA_DATABASE_URL": "postgresql://arena:pw-hidden@db:5432/arena",
}


@pytest.mark.parametrize("example", sorted((REPO / "config").glob("*.toml")), ids=lambda p: p.name)
def test_config_show_is_a_config_file_that_loads_back_the_same(
    example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ARENA_ENV_PATH", f"{tmp_path}/envs")  # an override from the environment too
    assert main(["config", "show", "--config", str(example)]) == 0
    shown = capsys.readouterr().out
    for secret in ("topsecret", "sk-hidden", "pw-hidden"):
        assert secret not in shown
    values = [line for line in shown.splitlines() if not line.startswith("#")]
    assert not [line for line in values if "*****" in line]  # no redacted value posing as a setting
    for name in SECRETS:
        assert f"set {name}" in shown  # each left-out secret names the variable that carries it
    written = tmp_path / "x.toml"
    written.write_text(shown)
    # With the secrets still in the environment (as the daemon has them) it is the same config ...
    assert load_config(written) == load_config(example)
    assert main(["config", "check", "--config", str(written)]) == 0
    assert "configuration OK" in capsys.readouterr().out
    # ... and nothing secret or derived came from the file itself.
    for name in SECRETS:
        monkeypatch.delenv(name)
    from_file = load_config(written)
    assert from_file.admin.token is None and from_file.models.helper.api_key is None
    assert from_file.store.url is None


def test_config_check_refuses_what_the_daemon_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.delenv("ARENA_ADMIN_TOKEN", raising=False)
    assert main(["config", "check", "--config", str(REPO / "config" / "cluster.toml")]) == 2
    assert "without a token" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[round]\nmax_turns = 0\n")
    assert main(["config", "check", "--config", str(bad)]) == 2
    assert "round.max_turns" in capsys.readouterr().err


def test_every_renamed_trainer_key_names_a_key_that_exists() -> None:
    from ops.config import RENAMED_KEYS, _known_key

    for old, new in RENAMED_KEYS.items():
        assert not _known_key(old) and _known_key(new), (old, new)


def test_the_trainer_fields_derived_from_other_sections_follow_them() -> None:
    from ops.phases.runtime import trainer_config

    # G = 3 and one group a step: an odd batch, so one completion per forward/backward pass.
    config = load_config(environ={"ARENA_ROUND__SAMPLES_PER_TASK": "3", "ARENA_TRAINER__TASKS_PER_STEP": "1"})
    assert (config.trainer.group_size, config.trainer.micro_batch_size) == (3, 1)
    assert config.trainer.max_steps == config.round.train_steps
    train = trainer_config(config, 5)
    assert (train.group_size, train.micro_batch_size, train.seed) == (3, 1, config.daemon.seed + 5)
    assert train.sft.max_length == train.episode.max_total_tokens


def test_keys_the_lower_models_brought_reach_what_uses_them() -> None:
    """Keys that became settings when the sections became the lower packages' own models act."""
    from ops.phases.runtime import trainer_config
    from simulate.backends import build_chat_model

    config = load_config(
        environ={
            "ARENA_SANDBOX__MAX_PROCESSES": "3",
            "ARENA_SANDBOX__DISK_MB": "8",
            "ARENA_MODELS__HELPER__BACKEND": "http",
            "ARENA_MODELS__HELPER__BASE_URL": "http://keys-test-helper:8000/v1",
            "ARENA_MODELS__HELPER__BREAKER_THRESHOLD": "2",
            "ARENA_MODELS__HELPER__BACKOFF_S": "0.05",
            "ARENA_MODELS__HELPER__RETURN_TOKEN_IDS": "false",
            "ARENA_TRAINER__ROLLOUT_DTYPE": "float32",
            "ARENA_TRAINER__OFF_POLICY__ENABLED": "false",
        }
    )
    limits = config.sandbox.limits()
    assert (limits.max_processes, limits.disk_mb) == (3, 8) and type(limits).__name__ == "SandboxLimits"
    helper = build_chat_model(config.models.helper, role="helper")
    assert helper.breaker.threshold == 2 and helper.backoff_s == 0.05  # type: ignore[attr-defined]
    assert helper.return_token_ids is False  # type: ignore[attr-defined]
    train = trainer_config(config, 1)
    assert train.rollout_dtype == "float32" and train.off_policy.enabled is False
