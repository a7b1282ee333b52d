"""Loading `tasks.toml`: every check kind parses, and every kind of mistake is reported with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.env.errors import EnvLoadError
from arena.env.runtime import Environment
from arena.tasks.model import AnswerCheck, PythonCheck, RubricCheck, SqlCheck, StateMatchCheck, split_task_id
from arena.tasks.toml_io import load_tasks, parse_tasks

GOOD = """
[[task]]
id = "t1"
instruction = "Move money."
answer = "Done."
difficulty = { tools = 2, level = "easy" }
[[task.reference]]
tool = "transfer"
args = { from_account = "ACC-1", to_account = "ACC-2", amount = 5 }
[[task.check]]
kind = "state_match"
ignore = ["transfers.created_at"]
[[task.check]]
kind = "sql"
name = "moved"
sql = "SELECT 1"
[[task.check]]
kind = "answer"
contains = ["done"]
[[task.check]]
kind = "python"
code = "def check(initial, final, answer):\\n    return True\\n"
[[task.check]]
kind = "rubric"
name = "polite"
criteria = ["The agent confirms the transfer."]

[[task]]
id = "talk"
instruction = "Hi."
mode = "conversational"
[task.user]
intent = "You want to know your balance."
persona = "terse"
[[task.check]]
kind = "answer"
contains = ["1200.5"]
"""


def _problems(text: str, **kwargs) -> list[str]:
    with pytest.raises(EnvLoadError) as info:
        parse_tasks(text, path="tasks.toml", env="bank", **kwargs)
    return [str(p) for p in info.value.problems]


def test_every_check_kind_parses(bank_env: Environment) -> None:
    tasks = parse_tasks(GOOD, path="tasks.toml", env="bank", tools=bank_env.tools)
    assert [t.full_id for t in tasks] == ["bank/t1", "bank/talk"]
    t1 = tasks[0]
    assert [type(c) for c in t1.checks] == [StateMatchCheck, SqlCheck, AnswerCheck, PythonCheck, RubricCheck]
    assert t1.reference[0].name == "transfer" and t1.reference[0].arguments["amount"] == 5
    assert t1.origin == "manual" and t1.difficulty == {"tools": 2, "level": "easy"}
    assert t1.needs_state and t1.needs_judge
    talk = tasks[1]
    assert talk.mode == "conversational" and talk.user is not None and talk.user.persona == "terse"
    assert not talk.needs_state


def test_load_tasks_from_folder(tmp_path: Path) -> None:
    assert load_tasks(tmp_path) == []  # no tasks.toml: no tasks, no error
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "tasks.toml").write_text(GOOD)
    assert [t.env for t in load_tasks(folder)] == ["bank", "bank"]


def test_invalid_toml_names_the_line() -> None:
    problems = _problems('[[task]]\nid = "a"\ninstruction = "x\n')
    assert len(problems) == 1 and problems[0].startswith("tasks.toml:3: invalid TOML")


def test_field_errors_point_at_lines() -> None:
    text = """
[[task]]
id = "ok-task"
instruction = "Do it."
[[task.check]]
kind = "sql"
name = "x"
[[task.check]]
kind = "answer"
contains = []
[[task.check]]
kind = "magic"

[[task]]
id = "bad id!"
instruction = "Do it."
colour = "red"
[[task.check]]
kind = "python"
code = "def check(initial, final, answer):\\n    return (\\n"
"""
    problems = _problems(text)
    joined = "\n".join(problems)
    assert "tasks.toml:5 [task[0].check[0].sql]: task 'ok-task': Field required" in joined
    assert "tasks.toml:8 [task[0].check[1]]: task 'ok-task': an answer check needs" in joined
    assert "tasks.toml:11 [task[0].check[2]]: task 'ok-task': Input tag 'magic'" in joined
    assert "tasks.toml:17 [task[1].colour]: task 'bad id!': unknown key" in joined
    assert "tasks.toml:20 [task[1].check[0].code]: task 'bad id!': python check does not compile" in joined


def test_task_level_rules() -> None:
    text = """
[[task]]
id = "bad id!"
instruction = "x"
[[task.check]]
kind = "state_match"

[[task]]
id = "chat"
instruction = "x"
mode = "conversational"
[[task.check]]
kind = "state_match"

[[task]]
id = "no-checks"
instruction = "x"

[[task]]
id = "chat"
instruction = "duplicate"
[[task.check]]
kind = "state_match"
"""
    problems = _problems(text)
    assert any("tasks.toml:3 [task[0].id]" in p and "must start with a letter" in p for p in problems)
    assert any("tasks.toml:8" in p and "conversational task needs `user`" in p for p in problems)
    assert any("tasks.toml:15 [task[2].check]" in p and "Field required" in p for p in problems)
    assert any("tasks.toml:20 [task[3].id]" in p and "duplicate id" in p for p in problems)


def test_unknown_top_level_key_and_reference_tools(bank_env: Environment) -> None:
    text = """
title = "oops"
[[task]]
id = "t"
instruction = "x"
[[task.reference]]
tool = "list_accounts"
[[task.reference]]
tool = "teleport"
[[task.reference]]
tool = "transfer"
args = { from_account = "ACC-1" }
[[task.check]]
kind = "state_match"
"""
    problems = _problems(text, tools=bank_env.tools)
    assert problems[0].startswith("tasks.toml:2 [title]: unknown top-level key")
    assert any("tasks.toml:9" in p and "unknown tool 'teleport'" in p for p in problems)
    assert any("tasks.toml:12" in p and "to_account: Field required" in p for p in problems)


def test_split_task_id() -> None:
    assert split_task_id("hotels/cancel-x") == ("hotels", "cancel-x")
    for bad in ("hotels", "/x", "hotels/", "a/b/c"):
        with pytest.raises(ValueError, match="ENV/ID"):
            split_task_id(bad)
