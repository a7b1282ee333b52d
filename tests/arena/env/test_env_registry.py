"""Discovery: bundled environments plus every folder on the environment path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from arena.env.errors import EnvLoadError
from arena.env.registry import Registry, bundled_env_dirs, check_env_path, discover, split_env_path

from .conftest import BROKEN, GOOD


def test_env_path_entries_can_be_one_env_or_a_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    found = discover([GOOD / "shop"])
    assert found["shop"] == GOOD / "shop"
    found = discover([GOOD])
    assert {"shop", "gate", "weather_sim"} <= set(found)
    for folder in bundled_env_dirs():
        assert folder.parent.name == "bundled" and (folder / "env.toml").is_file()


def test_arena_env_path_is_colon_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_ENV_PATH", f"{GOOD / 'shop'}:{GOOD / 'gate'}")
    found = discover()
    assert found["shop"] == GOOD / "shop" and found["gate"] == GOOD / "gate"
    assert "weather_sim" not in found
    assert split_env_path(["a:b", "c"]) == [Path("a"), Path("b"), Path("c")]


def test_later_entries_override_earlier_ones(
    env_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    copy = env_copy("good/shop")
    assert discover([GOOD, copy])["shop"] == copy


def test_bad_env_path_entries_are_reported(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    problems = check_env_path([tmp_path / "missing", tmp_path / "empty", GOOD])
    assert [p.message for p in problems] == [
        "environment path entry does not exist",
        "no environment here (no env.toml in it or its sub-folders)",
    ]


def test_registry_loads_lazily_and_remembers_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    registry = Registry([GOOD, BROKEN / "import_error"], include_environ=False)
    assert registry.get("gate") is registry.get("gate")
    with pytest.raises(EnvLoadError):
        registry.get("import_error")
    with pytest.raises(KeyError):
        registry.get("nope")
    loaded = registry.load_all()
    assert "shop" in loaded and "import_error" not in loaded
    assert "import_error" in registry.failures
