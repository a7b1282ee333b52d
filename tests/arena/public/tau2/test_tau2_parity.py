"""Parity with τ²'s own environment, on the mini domain: the comparison itself (equal, a result
changed, an end state changed) and the command around it, with a scripted fake side interpreter
standing in for one with tau2-bench's dependencies (CI has neither a checkout nor that venv)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from arena.public.tau2.parity import SideError, compare_task, run_parity
from arena.public.tau2.replay import replay_gold
from ops.cli import build_cli


def side_line(domain: Any, task: Any) -> dict[str, Any]:
    """What τ²'s environment reports for `task` when it agrees with Arena's port."""
    gold = replay_gold(domain, task)
    results = [r.model_dump() | {"seconds": 0.001} for r in gold.results]
    sha = hashlib.sha256(gold.store.canonical_json().encode()).hexdigest()
    return {"task": task.id, "results": results, "db_sha256": sha, "reset_s": 0.05, "verify_s": 0.2}


def fake_side(tmp_path: Path, lines: list[dict[str, Any]], exit_code: int = 0) -> str:
    """A scripted fake side interpreter: prints `lines` whatever it is asked, then exits."""
    data = tmp_path / "side-lines.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    script = tmp_path / "fake-side-python"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(data)!r}).read())\n"
        f"sys.stderr.write('ModuleNotFoundError: No module named loguru\\n')\nsys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    return str(script)


def test_a_task_that_agrees_and_the_differences_that_are_told_apart(mini_domain: Any) -> None:
    task = next(t for t in mini_domain.tasks if "DB" in t.evaluation_criteria.reward_basis)
    same = compare_task(mini_domain, task, side_line(mini_domain, task))
    assert same.results_equal and same.end_state_equal and same.gold_reward == 1.0 and not same.diffs
    changed = side_line(mini_domain, task)
    changed["results"][0]["content"] = "something else"
    other = compare_task(mini_domain, task, changed)
    assert not other.results_equal and other.end_state_equal
    assert other.diffs[0].index == 0 and other.diffs[0].tau2 == "something else"
    moved = side_line(mini_domain, task) | {"db_sha256": "0" * 64}
    assert compare_task(mini_domain, task, moved).end_state_equal is False
    short = side_line(mini_domain, task)
    short["results"] = short["results"][:-1]  # τ² made one call fewer
    assert compare_task(mini_domain, task, short).results_equal is False


def test_every_task_through_a_side_interpreter_with_timings(mini_domain: Any, tmp_path: Path) -> None:
    python = fake_side(tmp_path, [side_line(mini_domain, t) for t in mini_domain.tasks])
    report = run_parity(mini_domain, tmp_path, python)
    assert report.all_equal and len(report.tasks) == len(mini_domain.tasks)
    timing = report.timing
    assert timing is not None and timing.tau2_reset_s == 0.05 and timing.arena_reset_s > 0
    assert report.summary()["timing"]["episode_ratio"] > 0


def test_a_side_that_fails_or_answers_for_other_tasks_is_named(mini_domain: Any, tmp_path: Path) -> None:
    with pytest.raises(SideError, match=r"exit 1.*loguru"):
        run_parity(mini_domain, tmp_path, fake_side(tmp_path, [], exit_code=1))
    with pytest.raises(SideError, match="no result for tasks"):
        run_parity(mini_domain, tmp_path, fake_side(tmp_path, []))
    with pytest.raises(SideError, match="no interpreter"):
        run_parity(mini_domain, tmp_path, str(tmp_path / "no-such-python"))
    with pytest.raises(ValueError, match="no τ² retail tasks"):
        run_parity(mini_domain, tmp_path, "python3", task_ids=["nope"])


def test_the_command_exits_1_on_a_difference(
    mini_domain: Any, mini_checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from arena.public.tau2.importer import import_tau2

    data = tmp_path / "data"
    import_tau2(mini_checkout, "retail", data / "public" / "tau2" / "retail")
    monkeypatch.setenv("ARENA_DATA__DIR", str(data))
    lines = [side_line(mini_domain, t) for t in mini_domain.tasks]

    def bench(python: str) -> int:
        argv = ["bench", "tau2", "--parity", "--domain", "retail", "--from", str(mini_checkout)]
        args = build_cli().parser.parse_args([*argv, "--python", python, "--json"])
        return int(args.func(args))

    assert bench(fake_side(tmp_path, lines)) == 0
    doc = json.loads(capsys.readouterr().out)["parity"][0]
    assert doc["all_equal"] and doc["tasks"] == len(lines) and doc["different"] == []
    lines[0]["db_sha256"] = "0" * 64
    assert bench(fake_side(tmp_path, lines)) == 1
    doc = json.loads(capsys.readouterr().out)["parity"][0]
    assert [d["task"] for d in doc["different"]] == [lines[0]["task"]]
