"""Complexification grows a bundled environment into a new, green version."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from arena.env.loader import load_environment
from arena.env.registry import discover
from arena.env.unit_tests import run_tool_tests
from ops.cli import main


def test_complexify_adds_rows_keeps_tests_green_and_makes_a_new_version(
    tmp_path: Path, bundled_envs, capsys
) -> None:
    env = bundled_envs["food_delivery"]
    out = tmp_path / "envs" / "food_delivery.v001"
    assert main(["envs", "complexify", "food_delivery", "--rows", "15", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert sum(result["added"].values()) >= 10
    grown = load_environment(out, cache=False)
    assert grown.name == env.name and grown.version != env.version == result["version_before"]
    assert grown.version == result["version_after"]
    before = {t: env.template.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in result["added"]}
    for table, n in result["added"].items():
        assert grown.template.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == before[table] + n
    assert anyio.run(run_tool_tests, grown).ok
    # The registry loads the new version through the env path; the bundled folder is untouched.
    assert discover([out.parent], include_environ=False)["food_delivery"] == out
    assert load_environment(env.path, cache=False).version == env.version
    # Same inputs, same rows: complexification is deterministic.
    again = tmp_path / "again"
    assert main(["envs", "complexify", "food_delivery", "--rows", "15", "--out", str(again), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version_after"] == result["version_after"]


def test_complexify_refuses_an_existing_folder(tmp_path: Path, capsys) -> None:
    assert main(["envs", "complexify", "hotels", "--out", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
