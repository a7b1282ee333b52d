"""`arena envs list|show|check` through `ops.cli.main`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ops.cli import main

from .conftest import BROKEN, GOOD


@pytest.fixture(autouse=True)
def _no_environ_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    monkeypatch.delenv("ARENA_SANDBOX", raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_includes_a_folder_added_by_env_path(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "envs", "list", "--json", "--env-path", str(GOOD / "shop"))
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    shop = rows["shop"]
    assert {k: shop[k] for k in ("title", "category", "kind", "origin", "tools", "write_tools")} == {
        "title": "Test shop",
        "category": ["Shopping", "Online store"],
        "kind": "executable",
        "origin": "user",
        "tools": 5,
        "write_tools": ["place_order", "cancel_order"],
    }
    assert shop["path"] == str(GOOD / "shop") and len(shop["version"]) == 12


def test_list_text_and_arena_env_path(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARENA_ENV_PATH", str(GOOD))
    code, out, _ = run(capsys, "envs", "list")
    assert code == 0
    assert any(line.startswith("weather_sim") and "simulated" in line for line in out.splitlines())


def test_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "envs", "show", "shop", "--env-path", str(GOOD))
    assert code == 0
    assert "Only act on the logged-in user's orders" in out
    assert "cancel_order  [writes]" in out and 'reason: "mistake" | "too_slow" | "other" = "other"' in out
    code, out, _ = run(capsys, "envs", "show", str(GOOD / "gate"), "--json")
    card = json.loads(out)
    assert card["name"] == "gate" and card["tools"][0]["parameters"]["required"] == ["name"]


def test_show_unknown_and_broken(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "envs", "show", "nope")
    assert code == 2 and "unknown environment 'nope'" in err
    code, _, err = run(capsys, "envs", "show", str(BROKEN / "import_error"))
    assert code == 2 and "KeyError" in err and "Traceback" not in err


def test_check_passes_good_environments(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "envs", "check", "shop", "gate", "--env-path", str(GOOD))
    assert code == 0
    assert "gate: ok, 1/3 tools kept, 3/5 cases passed" in out
    assert "dropped half: passed 1/2 cases (needs more than half)" in out
    assert f"{GOOD / 'gate' / 'tests.toml'}:6: half: deliberately wrong expectation" in out


def test_check_broken_folder_gives_one_line_per_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "envs", "check", str(BROKEN / "everything"))
    assert code == 1 and "Traceback" not in out + err
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(lines) == 15
    assert any("schema.sql:4: SQL error" in line for line in lines)


def test_check_json_and_failing_gate(
    capsys: pytest.CaptureFixture[str], env_copy: Callable[[str], Path]
) -> None:
    folder = env_copy("good/gate")
    tests = (folder / "tests.toml").read_text()
    (folder / "tests.toml").write_text(tests.replace("expect = { value = 6 }", "expect = { value = 7 }"))
    code, out, _ = run(
        capsys, "envs", "check", "--json", str(folder), str(BROKEN / "bad_sim"), str(GOOD / "weather_sim")
    )
    assert code == 1
    report = json.loads(out)
    by_path = {Path(r["path"]).name: r for r in report["environments"]}
    assert report["ok"] is False
    assert by_path["gate"]["gate"]["reason"] == "no tool passed its tests" and not by_path["gate"]["ok"]
    assert len(by_path["bad_sim"]["problems"]) == 6
    assert by_path["weather_sim"]["ok"] is True


def test_bad_env_path_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "envs", "list", "--env-path", str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in err
    code, out, _ = run(capsys, "envs", "check", "nope")
    assert code == 1 and "no such environment name or folder" in out
