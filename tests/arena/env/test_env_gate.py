"""The Agent-World tool unit-test gate: keep a tool only above half of its cases passing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from arena.env.loader import load_environment
from arena.env.unit_tests import run_tool_tests, subset_mismatch

from .conftest import GOOD


def test_gate_keeps_two_thirds_and_drops_half_and_untested() -> None:
    report = anyio.run(run_tool_tests, load_environment(GOOD / "gate"))
    verdicts = {t.tool: t for t in report.tools}
    assert (verdicts["half"].passed, verdicts["half"].total, verdicts["half"].kept) == (1, 2, False)
    assert (verdicts["two_thirds"].passed, verdicts["two_thirds"].total, verdicts["two_thirds"].kept) == (
        2,
        3,
        True,
    )
    assert verdicts["untested"].kept is False and verdicts["untested"].reason == "no test cases"
    assert report.kept_tools == ["two_thirds"] and report.dropped_tools == ["half", "untested"]
    assert report.ok
    failures = {c.label: c for c in report.cases if not c.passed}
    assert set(failures) == {"half: deliberately wrong expectation", "two_thirds: deliberately wrong state"}
    assert failures["half: deliberately wrong expectation"].reason == "result.value: expected 99, got 2"
    assert failures["two_thirds: deliberately wrong state"].line == 24


def test_every_case_runs_on_a_fresh_instance() -> None:
    # place_order takes the last 2 of P-200 and cancel_order cancels ORD-1002: both pass only if
    # neither sees the other's changes (and each new order is ORD-N0001).
    report = anyio.run(run_tool_tests, load_environment(GOOD / "shop"))
    assert report.ok and all(c.passed for c in report.cases) and len(report.kept_tools) == 5


def test_env_fails_the_gate_without_a_kept_tool(env_copy: Callable[[str], Path]) -> None:
    folder = env_copy("good/gate")
    tests = (folder / "tests.toml").read_text()
    (folder / "tests.toml").write_text(tests.replace("expect = { value = 6 }", "expect = { value = 7 }"))
    report = anyio.run(run_tool_tests, load_environment(folder))
    assert not report.ok and report.kept_tools == [] and report.reason == "no tool passed its tests"


def test_expected_error_must_be_clean(env_copy: Callable[[str], Path]) -> None:
    folder = env_copy("good/gate")
    (folder / "tests.toml").write_text(
        '[[case]]\ntool = "half"\nargs = { name = 5 }\nexpect_error = true\n'  # invalid arguments: clean
        '[[case]]\ntool = "half"\nargs = { name = "zz" }\nexpect_error = "no counter zz"\n'
        '[[case]]\ntool = "half"\nargs = { name = "a" }\nexpect_error = true\n'
    )
    report = anyio.run(run_tool_tests, load_environment(folder))
    assert [c.passed for c in report.cases] == [True, True, False]
    assert report.cases[2].reason == "expected an error, got {'value': 1}"


@pytest.mark.parametrize(
    ("expected", "actual", "reason"),
    [
        ({"a": 1}, {"a": 1.0, "b": 2}, None),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2], "c": 0}}, None),
        ({"a": 1}, {"b": 1}, "result.a: missing"),
        ([{"id": 1}], [{"id": 1}, {"id": 2}], "result: expected 1 items, got 2"),
        ({"ok": True}, {"ok": 1}, "result.ok: expected True, got 1"),
        ("x", {"a": 1}, "result: expected 'x', got {'a': 1}"),
        ({"a": 1}, [1], "result: expected an object, got [1]"),
    ],
)
def test_subset_matching(expected: object, actual: object, reason: str | None) -> None:
    assert subset_mismatch(expected, actual) == reason


def test_restricting_to_the_kept_tools() -> None:
    env = load_environment(GOOD / "gate")
    report = anyio.run(run_tool_tests, env)
    view = env.restrict(report.kept_tools)
    assert [s.name for s in view.tool_specs] == ["two_thirds"] and view.write_tools == ["two_thirds"]
    assert view.template is env.template and {c.tool for c in view.tests} == {"two_thirds"}
    assert view.new_instance().call_sync("half", {"name": "a"}).error_kind == "unknown_tool"
    with pytest.raises(KeyError, match="nope"):
        env.restrict(["nope"])
