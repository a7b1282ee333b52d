"""`arena tasks list|replay` end to end through `ops.cli.main` on the test bank."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ops.cli import main

BANK_DIR = Path(__file__).parent / "fixtures" / "bank"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_text_and_json(capsys) -> None:
    code, out, _ = run(capsys, "tasks", "list", "bank", "--env-path", str(BANK_DIR))
    assert code == 0
    assert "bank/move-100-to-savings" in out and "[state_match, sql, python, answer]" in out
    code, out, _ = run(capsys, "tasks", "list", "bank", "--env-path", str(BANK_DIR), "--json")
    rows = json.loads(out)
    assert [r["full_id"] for r in rows] == ["bank/move-100-to-savings", "bank/checking-balance"]
    assert rows[0]["checks"][1] == {
        "kind": "sql",
        "name": "savings got 100",
        "sql": rows[0]["checks"][1]["sql"],
    }
    assert rows[0]["env_version"]


def test_replay_prints_the_verdict(capsys) -> None:
    code, out, _ = run(capsys, "tasks", "replay", "bank/move-100-to-savings", "--env-path", str(BANK_DIR))
    assert code == 0
    assert "reference replay: PASS reward=1.00 (4/4 checks)" in out
    assert "gold gate: ok" in out and "adversary gate: ok" in out
    assert "answer_no_call   earns 0.00" in out and "wrong_row" in out
    code, out, _ = run(
        capsys, "tasks", "replay", "bank/checking-balance", "--env-path", str(BANK_DIR), "--json"
    )
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    assert report["gold"]["verdict"]["reward"] == 1.0
    agents = {a["agent"]: a for a in report["adversary"]["agents"]}
    assert agents["empty"]["reward"] == 0.0 and not agents["reads_only"]["applies"]


def test_replay_of_a_broken_task_exits_1(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "bank"
    shutil.copytree(BANK_DIR, folder)
    text = (BANK_DIR / "tasks.toml").read_text().replace('contains = ["100"]', 'contains = ["999"]')
    (folder / "tasks.toml").write_text(text)
    code, out, _ = run(
        capsys, "tasks", "replay", "bank/move-100-to-savings", "--env-path", str(folder), "--json"
    )
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert "final answer: missing '999'" in report["gold"]["detail"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tasks", "replay", "bank"], "must look like ENV/ID"),
        (["tasks", "replay", "bank/nope"], "environment bank has no task 'nope'"),
        (["tasks", "list", "no_such_env"], "unknown environment 'no_such_env'"),
    ],
)
def test_bad_input_is_one_clear_line(capsys, argv: list[str], message: str) -> None:
    code, _, err = run(capsys, *argv, "--env-path", str(BANK_DIR))
    assert code == 2
    assert message in err and "Traceback" not in err


def test_broken_tasks_file_names_the_line(capsys, tmp_path: Path) -> None:
    folder = tmp_path / "bank"
    shutil.copytree(BANK_DIR, folder)
    (folder / "tasks.toml").write_text('[[task]]\nid = "x"\ninstruction = "y"\n')
    code, _, err = run(capsys, "tasks", "list", "bank", "--env-path", str(folder))
    assert code == 2
    assert "tasks of bank are broken:" in err and "tasks.toml:1 [task[0].check]" in err


def test_replay_in_the_sandbox(capsys, monkeypatch) -> None:
    monkeypatch.setenv("ARENA_SANDBOX", "all")  # the command opens a sandbox pool for tools and checks
    code, out, _ = run(capsys, "tasks", "replay", "bank/move-100-to-savings", "--env-path", str(BANK_DIR))
    assert code == 0 and "reference replay: PASS reward=1.00 (4/4 checks)" in out
