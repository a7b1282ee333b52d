"""`arena envs import-mcp -- arena mcp ENV` with ENV a user's folder on ARENA_ENV_PATH.

The server gets Arena's variables (not its secrets), a failure shows the server's whole error,
and neither success nor failure leaves a __pycache__ in the user's environment folder.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from arena.env.loader import load_environment
from ops.cli import main as cli_main
from simulate.importers import server_environment

ARENA = str(Path(sys.executable).parent / "arena")
BUNDLED = Path(__file__).resolve().parents[2] / "arena" / "env" / "bundled"


def user_env(root: Path, name: str) -> Path:
    """A user's environment folder: the bundled food_delivery under another name."""
    folder = root / name
    shutil.copytree(BUNDLED / "food_delivery", folder, ignore=shutil.ignore_patterns("__pycache__"))
    toml = folder / "env.toml"
    toml.write_text(toml.read_text().replace('name = "food_delivery"', f'name = "{name}"', 1))
    return folder


def test_server_environment_has_arena_settings_but_no_secrets() -> None:
    env = server_environment(
        {
            "ARENA_ENV_PATH": "/envs",
            "ARENA_SANDBOX": "all",
            "ARENA_ADMIN_TOKEN": "t",
            "ARENA_DATABASE_URL": "postgresql://a:pw@db/arena",
            "ARENA_MODELS__HELPER__API_KEY": "sk",
            "AWS_SECRET_ACCESS_KEY": "not arena's",
        }
    )
    assert env["ARENA_ENV_PATH"] == "/envs" and env["ARENA_SANDBOX"] == "all"
    assert not {"ARENA_ADMIN_TOKEN", "ARENA_DATABASE_URL", "ARENA_MODELS__HELPER__API_KEY"} & set(env)
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_import_mcp_finds_an_env_on_arena_env_path(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = user_env(tmp_path / "envs", "corner_deli")
    monkeypatch.setenv("ARENA_ENV_PATH", str(tmp_path / "envs"))
    out = tmp_path / "deli_sim"
    assert cli_main(["envs", "import-mcp", "--out", str(out), "--", ARENA, "mcp", "corner_deli"]) == 0
    assert "wrote simulated environment 'corner_deli_sim'" in capfd.readouterr().out
    assert len(load_environment(out).tool_specs) >= 10
    assert not list(folder.rglob("__pycache__"))


def test_a_failing_server_shows_its_whole_error_and_leaves_no_bytecode(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = user_env(tmp_path / "envs", "broken_deli")
    reason = "the tools need a warehouse connection that this machine has no credentials for " * 5
    (folder / "tools.py").write_text(f"raise RuntimeError({(reason + 'END').strip()!r})\n")
    monkeypatch.setenv("ARENA_ENV_PATH", str(tmp_path / "envs"))
    assert cli_main(["envs", "import-mcp", "--", ARENA, "mcp", "broken_deli"]) == 2
    err = capfd.readouterr().err
    assert "the server's stderr" in err
    assert reason + "END" in err, err  # the whole message, not its last 300 characters
    assert not list(folder.rglob("__pycache__"))
