"""Programmatic tasks: helper-written solution programs run in the sandbox, repaired, gated."""

from __future__ import annotations

import json

import pytest

from arena.sandbox import SandboxPool
from arena.synth.programmatic import synthesize_program_tasks
from arena.tasks.gates import run_gates

pytestmark = pytest.mark.anyio

CHECK = """
def check(initial, final, answer):
    q = "SELECT count(*) FROM orders WHERE user_id = 1 AND status = 'placed'"
    before = initial.execute(q).fetchone()[0]
    after = final.execute(q).fetchone()[0]
    return before > 0 and after == 0 and str(before) in answer
"""
GOOD = """
def solve(payload, tools):
    placed = tools.list_orders(status="placed")["orders"]
    for order in placed:
        tools.cancel_order(order_id=order["order_id"], reason="plans changed")
    return f"I cancelled {len(placed)} orders."
"""
BUGGY = GOOD.replace("tools.list_orders(", "tools.list_order(")
INSTRUCTION = 'My plans changed: cancel every order of mine that is still placed (reason "plans changed") and tell me how many.'


def reply(solution: str) -> str:
    return json.dumps({"instruction": INSTRUCTION, "solution": solution, "check": CHECK})


async def test_scripted_programs_are_repaired_run_and_gated(bundled_envs, scripted_helper) -> None:
    env = bundled_envs["food_delivery"]
    helper = scripted_helper([reply(BUGGY), reply(GOOD)])
    async with SandboxPool() as pool:
        res = await synthesize_program_tasks(env, 1, helper=helper, sandbox=pool, max_attempts=1)
        assert len(res.tasks) == 1, res.report.rejections
        task = res.tasks[0]
        assert "That failed" in helper.prompts[-1] or len(helper.prompts) == 2  # one repair round
        assert task.origin == "program" and task.id == "p-s0-00000"
        assert task.reference[0].name == "list_orders"
        assert sum(c.name == "cancel_order" for c in task.reference) >= 2
        assert {c.kind for c in task.checks} == {"state_match", "python"}
        report = await run_gates(env, task, sandbox=pool)
        assert report.ok, (report.gold.detail, report.empty.detail)
        assert res.report.stage("program").model_calls == 2

        # Broken beyond repair: nothing is kept, the rejection is counted.
        hopeless = scripted_helper([reply(BUGGY)])
        res = await synthesize_program_tasks(
            env, 1, helper=hopeless, sandbox=pool, max_attempts=1, max_repairs=2
        )
        assert res.tasks == [] and res.report.rejections == {"program": 1}
        assert len(hopeless.prompts) == 3


@pytest.mark.model
async def test_embedded_model_programs_are_rejected_cleanly(bundled_envs, helper_model) -> None:
    env = bundled_envs["food_delivery"]
    async with SandboxPool() as pool:
        res = await synthesize_program_tasks(
            env, 1, helper=helper_model, sandbox=pool, max_attempts=1, max_repairs=0, max_tokens=32
        )
    # Whatever the tiny model writes, a kept task passed every gate; typically nothing is kept.
    for task in res.tasks:
        assert task.reference and task.origin == "program"
    assert res.report.attempts == 1 and res.report.stage("program").model_calls >= 1
