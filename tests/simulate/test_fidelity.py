"""`arena bench sim`: tool and judge fidelity against executable environments.

`ScriptedFakeHelper` is not a model: it answers the tool simulator and the judge with fixed JSON
(chosen by the system prompt of the request), so the arithmetic and the fact comparison are
checked exactly. One test runs the CLI with the real embedded model on one task.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from arena.env.instance import ToolResult
from arena.env.loader import load_environment
from arena.env.registry import bundled_env_dirs
from arena.env.runtime import Environment
from arena.store import Store, latest_fidelity
from arena.tasks.adversary import ADVERSARIES
from arena.tasks.judge import JUDGE_SYSTEM
from arena.tasks.model import Task
from arena.types import Completion, Message, SamplingParams, ToolSpec
from ops.cli import main
from ops.fidelity_report import build_report
from simulate.backends import ModelSpec
from simulate.fidelity import FidelityConfig, compare_call, measure_env
from simulate.fidelity_facts import check_values
from simulate.simulators.tool import TOOL_SYSTEM

pytestmark = pytest.mark.anyio

FREEZE = {
    "id": "freeze-debit",
    "env": "banking",
    "instruction": "I can't find my debit card for Everyday Checking. Please freeze it for now.",
    "answer": "Your debit card ending 3318 is frozen.",
    "reference": [
        {"name": "list_cards", "arguments": {}},
        {"name": "freeze_card", "arguments": {"card_id": "CARD-11"}},
    ],
    "checks": [
        {"kind": "state_match"},
        {
            "kind": "sql",
            "name": "frozen",
            "sql": "SELECT status = 'frozen' FROM cards WHERE card_id = 'CARD-11'",
        },
    ],
}


class ScriptedFakeHelper:
    """A scripted stand-in for the helper (no model): fixed tool results and fixed judge verdicts."""

    name = "scripted-fake"

    def __init__(self, *, judge: bool | None = True, tool_result: dict[str, Any] | None = None) -> None:
        self.judge = judge  # None: the judge answers with unusable text
        self.tool_result = tool_result if tool_result is not None else {"card_id": "CARD-11"}
        self.asked: list[str] = []

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        system = messages[0].content
        if system == TOOL_SYSTEM:
            self.asked.append("tool")
            text = json.dumps({"status": "ok", "result": self.tool_result, "error": "", "tool_reward": 1})
        elif system == JUDGE_SYSTEM:
            self.asked.append("judge")
            assert params is not None and params.json_schema is not None
            n = params.json_schema["properties"]["verdicts"]["minItems"]
            verdicts = [{"criterion": i, "reason": "scripted", "passed": self.judge} for i in range(1, n + 1)]
            text = "no verdict today" if self.judge is None else json.dumps({"verdicts": verdicts})
        else:
            raise AssertionError(f"unexpected prompt: {system[:80]}")
        return Completion(text=text, model=self.name)


def _env(name: str) -> Environment:
    return next(load_environment(d) for d in bundled_env_dirs() if d.name == name)


def _report(results: list[Any]) -> dict[str, Any]:
    return build_report(results, helper_id="fake:scripted", settings={}, seconds=0.0, notes=[])


def test_check_values_read_every_kind_of_check() -> None:
    task = Task.model_validate(
        {
            **FREEZE,
            "checks": [
                {"kind": "answer", "contains": [["3318", "three"], "frozen"]},
                {
                    "kind": "sql",
                    "name": "n",
                    "sql": "SELECT COUNT(*) = 7 AND amount = 12.5 FROM t WHERE s = 'it''s'",
                },
                {
                    "kind": "python",
                    "code": "def check(initial, final, answer):\n"
                    "    row = final.execute(\"SELECT x FROM t WHERE id = 'ACC-9'\").fetchone()\n"
                    "    return row[0] == 'held' and 1 > 0",
                },
                {"kind": "action", "calls": [{"tool": "freeze_card", "args": {"card_id": "CARD-12"}}]},
            ],
        }
    )
    values = check_values(task)
    assert values[:3] == ["3318", "three", "frozen"]  # answer values (alternatives too) first
    assert set(values) == {
        "3318",
        "three",
        "frozen",
        "it's",
        "7",
        "12.5",
        "ACC-9",
        "held",
        "CARD-12",
        "CARD-11",
    }
    assert len(values) == len(set(values))  # 0 and 1 are no facts; the query text is no fact either


def test_fact_comparison_counts_given_hidden_and_reproduced() -> None:
    task = Task.model_validate(FREEZE)
    values = check_values(task)  # frozen, CARD-11 (7 rows is no literal here)
    real = ToolResult(
        tool="freeze_card", ok=True, output={"card_id": "CARD-11", "last4": "3318", "status": "frozen"}
    )
    sim = ToolResult(tool="freeze_card", ok=True, output={"id": "card-11", "state": "active"})
    record = compare_call(task, 1, real, sim, "", values)
    assert record.facts == ["frozen", "CARD-11"]
    assert record.given == ["CARD-11"]  # in the call's arguments; "frozen" is not in the intent
    assert record.reproduced == ["CARD-11"]  # normalized: case does not matter
    failed = ToolResult(tool="freeze_card", ok=False, error="card CARD-11 frozen", error_kind="tool_error")
    assert compare_call(task, 1, real, failed, "", values).reproduced == []  # an error reproduces nothing
    assert compare_call(task, 1, real, None, "tool simulator gave up", values).sim_error


async def test_tool_fidelity_of_a_fixed_simulator(tmp_path: Path) -> None:
    helper = ScriptedFakeHelper()
    task = Task.model_validate(FREEZE)
    result = await measure_env(
        _env("banking"), helper, FidelityConfig(episodes_per_kind=1), tmp_path, tasks=[task]
    )
    calls = result.calls
    assert [c.tool for c in calls] == ["list_cards", "freeze_card"]
    # Both real results show CARD-11 and "frozen" (another card is frozen already); the fake shows CARD-11.
    assert [c.facts for c in calls] == [["frozen", "CARD-11"], ["frozen", "CARD-11"]]
    assert [c.reproduced for c in calls] == [["CARD-11"], ["CARD-11"]]
    tools = _report([result])["overall"]["tools"]
    assert tools["facts"] == 4 and tools["reproduced"] == 2 and tools["tool_fidelity"] == 0.5
    assert tools["given_facts"] == 1 and tools["given_fidelity"] == 1.0
    assert tools["hidden_facts"] == 3 and tools["hidden_fidelity"] == pytest.approx(1 / 3)
    assert tools["outcome_agreement"] == 1.0


@pytest.mark.parametrize("verdict", [True, False])
async def test_judge_arithmetic_with_a_constant_judge(tmp_path: Path, verdict: bool) -> None:
    helper = ScriptedFakeHelper(judge=verdict)
    result = await measure_env(
        _env("banking"), helper, FidelityConfig(tasks=3, episodes_per_kind=3), tmp_path
    )
    kinds = [j.kind for j in result.judge]
    assert kinds.count("gold") == 3 and len(kinds) == 6  # balanced: as many non-working as gold
    assert len(set(kinds) - {"gold"}) == 3  # the non-working agents are taken in turn
    assert all(j.verifier_passed for j in result.judge if j.kind == "gold")
    assert not any(j.verifier_passed for j in result.judge if j.kind != "gold")
    judge = _report([result])["overall"]["judge"]
    gold_share = 3 / 6
    if verdict:  # always passes: every non-working episode is a false pass
        assert judge["false_pass"]["value"] == 1.0 and judge["false_pass"]["n"] == 3
        assert judge["false_fail"]["value"] == 0.0
        assert judge["agreement"]["value"] == gold_share
    else:
        assert judge["false_fail"]["value"] == 1.0 and judge["false_pass"]["value"] == 0.0
        assert judge["agreement"]["value"] == 1 - gold_share
    low, high = judge["agreement"]["low"], judge["agreement"]["high"]
    assert 0.0 < low < judge["agreement"]["value"] < high < 1.0
    # Each simulated episode asks the helper once per reference call (no read repeats) and once to judge.
    assert [c.sim_helper_calls for c in result.cost] == [
        sum(c.task == task for c in result.calls) + 1 for task in result.tasks
    ]
    assert _report([result])["overall"]["cost"]["episodes"] == 3


async def test_a_judge_without_a_valid_answer_fails_the_episode(tmp_path: Path) -> None:
    helper = ScriptedFakeHelper(judge=None)
    task = Task.model_validate(FREEZE)
    result = await measure_env(
        _env("banking"), helper, FidelityConfig(episodes_per_kind=1), tmp_path, tasks=[task]
    )
    judge = _report([result])["overall"]["judge"]
    assert judge["episodes"] == 2 and judge["judge_errors"] == 2
    assert judge["false_fail"]["value"] == 1.0 and judge["false_pass"]["value"] == 0.0
    assert all(not j.judge_passed for j in result.judge)


def test_a_model_config_names_its_model() -> None:
    assert ModelSpec().identity() == "local:embedded"
    http = ModelSpec(backend="http", model="Qwen/Qwen3-8B", base_url="http://vllm:8000/v1/")
    assert http.identity() == "http:Qwen/Qwen3-8B@http://vllm:8000/v1"
    relative = ModelSpec(model="models/helper")  # a folder: named by its absolute path
    assert relative.identity() == f"local:{os.path.abspath('models/helper')}"


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--env", "atlantis"], "unknown environment(s) for --env: atlantis"),
        (["--env", "sports"], "--env sports: simulated, not executable"),
        (["--tasks", "0"], "--tasks must be at least 1 (got 0)"),
        (["--episodes-per-kind", "-1"], "--episodes-per-kind must be at least 1 (got -1)"),
        (
            ["--helper", "/no/such/model"],
            "--helper '/no/such/model': not 'embedded' and no such model folder",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "sim", *argv]) == 2
    assert problem in capsys.readouterr().err


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "arena.toml"
    path.write_text(
        f'[data]\ndir = "{tmp_path}"\n[store]\nurl = "sqlite+aiosqlite:///{tmp_path / "arena.db"}"\n'
    )
    return path


async def test_save_writes_a_row_that_latest_fidelity_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import anyio.to_thread

    import simulate.backends

    monkeypatch.setattr(simulate.backends, "build_chat_model", lambda spec, **kw: ScriptedFakeHelper())
    config = _config(tmp_path)
    url = f"sqlite+aiosqlite:///{tmp_path / 'arena.db'}"
    async with Store(url) as store:
        assert await store.migrate() == "0006"
        assert await store.revision() == "0006"
    argv = ["bench", "sim", "--env", "banking", "--tasks", "1", "--episodes-per-kind", "1"]
    # The CLI runs its own event loop: call it from a worker thread.
    code = await anyio.to_thread.run_sync(lambda: main([*argv, "--config", str(config), "--save", "--json"]))
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    async with Store(url) as store, store.transaction() as session:
        row = await latest_fidelity(session, "local:embedded")
        assert await latest_fidelity(session, "http:other@http://x") is None
    assert row is not None
    judge = report["overall"]["judge"]
    assert row.episodes == judge["episodes"] == 2
    assert row.judge_agreement == judge["agreement"]["value"] == 0.5
    assert (row.agreement_low, row.agreement_high) == (judge["agreement"]["low"], judge["agreement"]["high"])
    assert row.false_pass == 1.0 and row.false_fail == 0.0
    assert row.false_pass_low is not None and row.false_fail_high is not None
    assert row.tool_fidelity == report["overall"]["tools"]["tool_fidelity"]
    assert row.report["helper"] == "local:embedded" and row.report["envs"][0]["env"] == "banking"


def test_save_refuses_a_store_not_migrated_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import simulate.backends

    def no_model(spec: Any, **kw: Any) -> Any:
        raise AssertionError("the helper must not be loaded for a run that cannot be saved")

    monkeypatch.setattr(simulate.backends, "build_chat_model", no_model)
    argv = ["bench", "sim", "--env", "banking", "--tasks", "1", "--episodes-per-kind", "1"]
    assert main([*argv, "--config", str(_config(tmp_path)), "--save"]) == 2
    assert "the store is at revision none, not 0006: run `arena db upgrade` first" in capsys.readouterr().err


REPORT_FIELDS = {"helper", "settings", "envs", "overall", "balance", "seconds", "notes"}
SUMMARY_FIELDS = {"env", "tasks", "tools", "judge", "cost"}
TOOL_FIELDS = {
    "calls", "outcome_agreement", "simulator_failures", "facts", "reproduced", "tool_fidelity",
    "given_facts", "given_fidelity", "hidden_facts", "hidden_fidelity",
}  # fmt: skip
JUDGE_FIELDS = {
    "episodes", "verifier_passed", "verifier_failed", "judge_errors", "agreement", "false_pass",
    "false_fail", "by_kind",
}  # fmt: skip
COST_FIELDS = {"episodes", "sim_seconds", "sim_tokens", "sim_helper_calls", "exec_seconds", "slowdown"}


@pytest.mark.model
@pytest.mark.slow
def test_cli_json_with_the_embedded_helper(
    embedded_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "sim", "--json", "--env", "banking", "--tasks", "1", "--episodes-per-kind", "1"]
    assert main([*argv, "--helper", str(embedded_model_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == REPORT_FIELDS
    assert report["helper"] == f"local:{os.path.abspath(embedded_model_path)}"
    assert [e["env"] for e in report["envs"]] == ["banking"]
    for summary in [*report["envs"], report["overall"]]:
        assert set(summary) >= SUMMARY_FIELDS
        assert set(summary["tools"]) == TOOL_FIELDS
        assert set(summary["judge"]) == JUDGE_FIELDS
        assert set(summary["cost"]) == COST_FIELDS
        for name in ("agreement", "false_pass", "false_fail"):
            assert set(summary["judge"][name]) == {"value", "low", "high", "k", "n"}
    overall = report["overall"]
    assert overall["tasks"] == 1 and overall["judge"]["episodes"] == 2
    assert overall["judge"]["verifier_passed"] == 1 and overall["judge"]["verifier_failed"] == 1
    assert overall["tools"]["calls"] >= 1 and overall["tools"]["facts"] >= 1
    assert overall["cost"]["episodes"] == 1 and overall["cost"]["sim_tokens"] > 0


async def test_every_non_working_agent_takes_its_turn(tmp_path: Path) -> None:
    result = await measure_env(
        _env("banking"), ScriptedFakeHelper(), FidelityConfig(tasks=10, episodes_per_kind=10), tmp_path
    )
    gold = [j for j in result.judge if j.kind == "gold"]
    other = [j for j in result.judge if j.kind != "gold"]
    assert len(gold) == len(other) == len(result.tasks) >= 6
    assert {j.kind for j in other} == set(ADVERSARIES)
    assert not any(j.verifier_passed for j in other)
