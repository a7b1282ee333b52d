"""BFCL's rules as Arena applies them, on real entries: each error type, where it is found, what does
not fail (steps split differently, a result seen in an earlier turn), the irrelevance rule and its
leaderboard-runner variant, and `arena bench bfcl --score FILE` on a decoded result file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.env.object_runtime import ObjectRunner
from arena.public.bfcl.checker import Verdict, score
from ops.cli import main

BASE_0 = [
    ["cd(folder='document')", "mkdir(dir_name='temp')", "mv(source='final_report.pdf', destination='temp')"],
    ["cd(folder='temp')", "grep(file_name='final_report.pdf',pattern='budget analysis')"],
    ["sort('final_report.pdf')"],
    [
        "cd(folder='..')",
        "mv(source='previous_report.pdf',destination='temp')",
        "cd(folder='temp')",
        "diff(file_name1='final_report.pdf',file_name2='previous_report.pdf')",
    ],
]


def steps(*turns: list[str]) -> list[list[list[str]]]:
    """One step per turn; an empty turn has no step."""
    return [[t] if t else [] for t in turns]


def verdict(bfcl: Any, entry_id: str, decoded: Any, **kwargs: Any) -> Verdict:
    runner = ObjectRunner(bfcl.backend(), "bfcl")
    return anyio.run(lambda: score(bfcl.entry(entry_id), decoded, runner, **kwargs))


def test_the_ground_truth_passes_however_its_steps_are_split(bfcl: Any) -> None:
    assert bfcl.entry("multi_turn_base_0").ground_truth == BASE_0
    assert verdict(bfcl, "multi_turn_base_0", steps(*BASE_0)).passed
    split = [[[c] for c in turn] for turn in BASE_0]  # every call a step of its own, empty steps too
    split[1].append([])
    assert verdict(bfcl, "multi_turn_base_0", split).passed


@pytest.mark.parametrize(
    ("turns", "error", "turn"),
    [
        (BASE_0[:3], "force_terminated", 3),
        ([BASE_0[0], [], *BASE_0[2:]], "empty_turn", 1),
        ([BASE_0[0][:2], *BASE_0[1:]], "state_mismatch", 0),  # the file was never moved
        ([BASE_0[0], BASE_0[1][:1], *BASE_0[2:]], "missing_result", 1),  # grep's result never seen
        ([BASE_0[0], [*BASE_0[1], "touch(file_name='x.txt')"], *BASE_0[2:]], "state_mismatch", 1),
    ],
)
def test_each_rule_fails_the_entry_at_the_first_turn_it_finds(
    bfcl: Any, turns: list[list[str]], error: str, turn: int
) -> None:
    v = verdict(bfcl, "multi_turn_base_0", steps(*turns))
    assert not v.passed and (v.error_type, v.turn) == (error, turn)
    assert v.bfcl_error_type and v.bfcl_error_type.startswith("multi_turn:")


def test_a_result_seen_in_an_earlier_turn_counts_and_private_attributes_are_no_state(bfcl: Any) -> None:
    # Turn 0 already goes into `temp` and greps (the working directory is a private attribute, so
    # the states still match); turn 1 then only asks where it is: grep's result was seen before.
    early = [[*BASE_0[0], *BASE_0[1]], ["pwd()"], *BASE_0[2:]]
    assert verdict(bfcl, "multi_turn_base_0", steps(*early)).passed


def test_a_call_in_a_turn_that_expects_none_fails_unless_scored_as_the_runner_does(bfcl: Any) -> None:
    entry = bfcl.entry("multi_turn_miss_param_0")
    empty = next(t for t, gt in enumerate(entry.ground_truth) if not gt)
    turns = [list(gt) for gt in entry.ground_truth]
    turns[empty] = ["ls()"]  # reads: changes no state, so only the irrelevance rule sees it
    strict = verdict(bfcl, entry.id, steps(*turns))
    assert (strict.passed, strict.error_type, strict.turn) == (False, "irrelevance", empty)
    assert verdict(bfcl, entry.id, steps(*turns), irrelevance=False).passed


def test_the_cli_can_score_as_bfcls_runner_does(
    bfcl: Any, bfcl_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = bfcl.entry("multi_turn_miss_param_0")
    turns = [list(gt) or ["ls()"] for gt in entry.ground_truth]  # a read in the turn expecting none
    file = tmp_path / "result.json"
    file.write_text(json.dumps([{"id": entry.id, "result": steps(*turns)}]))
    argv = ["bench", "bfcl", "--dir", str(bfcl_folder), "--score", str(file), "--json"]
    for extra, passed in (([], False), (["--skip-irrelevance-check"], True)):
        assert main([*argv, *extra]) == 0
        assert json.loads(capsys.readouterr().out)["overall"]["passed"] == int(passed)


def test_score_file_rescores_another_harness_results(
    bfcl: Any, bfcl_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = bfcl.entry("multi_turn_long_context_7")
    rows = [
        {"id": "multi_turn_base_0", "result": steps(*BASE_0)},
        {"id": other.id, "result": steps(*other.ground_truth)},
        {"id": "multi_turn_base_1", "result": steps(*bfcl.entry("multi_turn_base_1").ground_truth[:-1], [])},
    ]
    file = tmp_path / "result.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["bench", "bfcl", "--dir", str(bfcl_folder), "--score", str(file), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == f"score:{file}" and doc["version"] == bfcl.version and doc["entries"] == 3
    got = {v["entry_id"]: (v["passed"], v["error_type"]) for v in doc["verdicts"]}
    assert got == {
        "multi_turn_base_0": (True, None),
        other.id: (True, None),
        "multi_turn_base_1": (False, "empty_turn"),
    }
    assert doc["overall"]["passed"] == 2 and doc["categories"]["long_context"]["n"] == 1
    file.write_text('{"id": "multi_turn_base_0", "result": ["cd(folder=\'x\')"]}\n')
    assert main(["bench", "bfcl", "--dir", str(bfcl_folder), "--score", str(file)]) == 2
    assert "BFCL's decoded form" in capsys.readouterr().err
