"""Python checks and sandboxed environments through the real sandbox pool."""

from __future__ import annotations

import pytest

from arena.sandbox import SandboxLimits
from arena.sandbox.pool import SandboxPool
from arena.tasks.gates import run_gates
from arena.tasks.model import PythonCheck
from arena.tasks.verify import verify

pytestmark = pytest.mark.anyio

TRANSFER = ("transfer", {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 100})


async def test_synthesized_python_checks_run_in_the_sandbox(play, bank_env, bank_tasks) -> None:
    task = bank_tasks["move-100-to-savings"].model_copy(
        update={
            "origin": "graph",
            "checks": [
                bank_tasks["move-100-to-savings"].checks[2],  # money is conserved: passes
                PythonCheck(name="raises", code="def check(initial, final, answer):\n    return 1 / 0\n"),
                PythonCheck(
                    name="spins", code="def check(initial, final, answer):\n    while True:\n        pass\n"
                ),
                PythonCheck(
                    name="escapes",
                    code="def check(initial, final, answer):\n    return open('/etc/passwd').read() != ''\n",
                ),
            ],
        }
    )
    limits = SandboxLimits(cpu_seconds=0.5, wall_timeout_s=1.5)
    async with SandboxPool(limits, workers=1) as pool:
        instance = bank_env.new_instance()
        transcript = await play(instance, [TRANSFER], "Moved $100.", instruction=task.instruction)
        verdict = await verify(task, instance, transcript, sandbox=pool)
        await instance.aclose()
    details = {c.name: (c.passed, c.detail) for c in verdict.checks}
    assert details["money is conserved"] == (True, "check returned True")
    assert details["raises"][0] is False and "ZeroDivisionError" in details["raises"][1]
    assert details["spins"][0] is False and details["spins"][1].startswith("in the sandbox:")
    assert details["escapes"][0] is False and details["escapes"][1].startswith("in the sandbox:")
    assert verdict.score == pytest.approx(0.25)
    assert verdict.reward == 0.0  # broken checks leave the work unverified: nothing pays


async def test_gates_in_a_sandboxed_environment(bank_env, bank_tasks, monkeypatch) -> None:
    monkeypatch.setenv("ARENA_SANDBOX", "all")  # tools and python checks all go to the sandbox
    async with SandboxPool(workers=1) as pool:
        report = await run_gates(bank_env, bank_tasks["move-100-to-savings"], sandbox=pool)
    assert report.ok, (report.gold.detail, report.empty.detail)
    assert report.gold.verdict is not None and report.gold.verdict.reward == 1.0
