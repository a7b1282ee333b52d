"""The gold and adversary gates, on the test bank and on every bundled environment's tasks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.env.errors import EnvLoadError
from arena.env.loader import BUNDLED_ROOT, load_environment
from arena.env.registry import bundled_env_dirs
from arena.tasks.adversary import ADVERSARIES, transcript_of
from arena.tasks.gates import adversary_gate, gold_gate, run_gates
from arena.tasks.model import AnswerCheck, SqlCheck, StateMatchCheck, Task
from arena.tasks.replay import replay_reference
from arena.tasks.toml_io import load_tasks
from arena.tasks.verify import verify
from arena.types import ToolCall

pytestmark = pytest.mark.anyio


async def test_bank_tasks_pass_both_gates(bank_env, bank_tasks) -> None:
    for task in bank_tasks.values():
        report = await run_gates(bank_env, task)
        assert report.ok, (report.gold.detail, report.adversary.detail)
        assert report.gold.verdict is not None and report.gold.verdict.reward == 1.0
        assert [a.agent for a in report.adversary.agents] == list(ADVERSARIES)
        assert all(a.reward == 0.0 for a in report.adversary.agents)


async def test_failing_reference_call_fails_gold(bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"].model_copy(
        update={
            "reference": [
                ToolCall(
                    name="transfer",
                    arguments={"from_account": "ACC-2", "to_account": "ACC-1", "amount": 5000},
                )
            ]
        }
    )
    result = await gold_gate(bank_env, task)
    assert not result.ok and result.detail.startswith(
        "reference call 1 (transfer) failed: insufficient funds"
    )
    report = await run_gates(bank_env, task)
    assert not report.ok and "insufficient funds" in report.gold.detail


async def test_check_the_reference_cannot_pass_fails_gold(bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"].model_copy(
        update={
            "checks": [
                StateMatchCheck(),
                SqlCheck(
                    name="impossible", sql="SELECT balance = 0 FROM accounts WHERE account_id = 'ACC-2'"
                ),
            ]
        }
    )
    result = await gold_gate(bank_env, task)
    assert not result.ok
    assert result.detail == "reference solution fails: impossible: query returned 0"
    assert result.verdict is not None and result.verdict.reward == 0.0
    assert result.verdict.unearned == "the work is not verified: impossible"


async def test_checks_that_pass_without_acting_fail_the_adversary_gate(bank_env, bank_tasks) -> None:
    lazy = bank_tasks["checking-balance"].model_copy(
        update={"checks": [StateMatchCheck(), AnswerCheck(not_contains=["300"])]}
    )
    assert (await gold_gate(bank_env, lazy)).ok
    result = await adversary_gate(bank_env, lazy)
    assert not result.ok and result.detail.startswith("empty earns 1.00")


async def test_replay_reference_returns_results_and_instance(bank_env, bank_tasks) -> None:
    instance, results = await replay_reference(bank_env, bank_tasks["move-100-to-savings"])
    try:
        assert [r.ok for r in results] == [True, True]
        assert results[1].output == {"transfer_id": "TX-N0001", "amount": 100.0}
        assert instance.db.one("SELECT balance FROM accounts WHERE account_id = 'ACC-2'") == {
            "balance": 400.0
        }
    finally:
        await instance.aclose()


async def test_gates_on_a_simulated_environment() -> None:
    env = SimpleNamespace(name="weather", kind="simulated")  # no state: only answer/rubric checks apply
    task = Task(
        id="forecast",
        env="weather",
        instruction="Weather in Oslo tomorrow?",
        answer="Tomorrow Oslo gets 12 °C and rain.",
        reference=[ToolCall(name="forecast", arguments={"city": "Oslo"})],
        checks=[AnswerCheck(contains=["12", "rain"])],
    )
    report = await run_gates(env, task)
    assert report.ok, (report.gold.detail, report.adversary.detail)
    # Only the agents that make no call apply: a simulated environment has no state to write.
    assert {a.agent for a in report.adversary.agents if a.applies} == {
        "empty",
        "answer_no_call",
        "values_done",
    }


def _bundled() -> list[Path]:
    folders = [p for p in BUNDLED_ROOT.iterdir() if p.is_dir()] if BUNDLED_ROOT.is_dir() else []
    if not folders:
        pytest.skip("no bundled environments exist yet (arena/env/bundled/ is empty)")
    dirs = bundled_env_dirs()
    assert dirs, f"arena/env/bundled/ has folders {[p.name for p in folders]} but none is an environment"
    return dirs


async def test_every_bundled_task_passes_both_gates() -> None:
    """Gold replays score 1.0 and every non-working agent earns exactly 0 on every bundled task."""
    failures: list[str] = []
    total = 0
    for folder in _bundled():
        try:
            env = load_environment(folder)
            tasks = load_tasks(folder, env.name, tools=env.tools)
        except EnvLoadError as exc:
            failures.append(f"{folder.name}: does not load: {exc}")
            continue
        for task in tasks:
            total += 1
            report = await run_gates(env, task)
            if not report.gold.ok:
                failures.append(f"{task.full_id}: gold gate: {report.gold.detail}")
            if report.gold.verdict is None or report.gold.verdict.reward != 1.0:
                failures.append(f"{task.full_id}: gold replay does not score 1.0")
            if not report.adversary.ok:
                failures.append(f"{task.full_id}: adversary gate: {report.adversary.detail}")
    assert total > 0, "no bundled environment has tasks"
    assert not failures, "\n".join(failures)


async def test_sandboxed_environment_without_a_sandbox_fails_cleanly(
    bank_env, bank_tasks, monkeypatch
) -> None:
    monkeypatch.setenv("ARENA_SANDBOX", "all")  # every environment's tools must now run in the sandbox
    report = await run_gates(bank_env, bank_tasks["move-100-to-savings"])
    assert not report.ok
    assert "runs its tools in the sandbox, and none was given" in report.gold.detail


# Bundled tasks whose answer check an answer that pastes every reference result still passes: each
# asks for a value of a record the reference reads, so the paste does report it. Anything else in
# this list would be an answer check a policy can win without choosing (add `not_contains`).
PASTE_PASSES = {
    "calendar/who-organizes-vendor-demo",
    "email/lisbon-confirmation-code",
    "flights/book-chicago-laguardia-for-two",
    "food_delivery/cancel-mistaken-order",
    "hotels/book-alfama-junior-suite",
    "library/pay-all-unpaid-fines",
    "library/borrow-dune-at-central",
    "library/pay-circe-fine-paypal",
    "shop_orders/order-cart-to-work-with-paypal",
}


async def test_pasting_every_tool_result_passes_only_the_listed_answer_checks() -> None:
    passed: set[str] = set()
    answer_checks = 0
    for folder in _bundled():
        env = load_environment(folder)
        for task in load_tasks(folder, env.name, tools=env.tools):
            if not any(isinstance(c, AnswerCheck) for c in task.checks):
                continue
            answer_checks += 1
            instance, results = await replay_reference(env, task)
            try:
                paste = " ".join(json.dumps(r.output) for r in results if r.ok)
                # The paste follows the reference's calls, so every value in it was observed.
                transcript = transcript_of(task, task.reference, results, paste)
                verdict = await verify(task, instance, transcript, env=env)
            finally:
                await instance.aclose()
            if all(c.passed for c in verdict.checks if c.kind == "answer"):
                passed.add(task.full_id)
    assert answer_checks >= 36
    assert passed == PASTE_PASSES
