"""Simulated environments in PLAN and SYNTHESIZE: the simulated training gate, and TRUSTEE tasks
through the judged task gates.

The helpers here are scripted fakes (named as such): `ScriptedFakeHelper` writes a fixed task for
the task generator and answers the judge with a policy of its own (fair, lax or strict), so that
each gate's decision is known. The phases, the gates, the store and the metrics are real.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from arena.env.registry import Registry
from arena.store import Store
from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage
from ops.metrics import Metrics
from ops.phases.synthesize import SynthesizePhase
from simulate.sim_gates import run_sim_gates
from simulate.simulators.judge import TrajectoryJudge
from simulate.simulators.taskgen import TaskGenerator

pytestmark = pytest.mark.anyio

TASK = {
    "intent": "Know whether it will rain in Lyon tomorrow",
    "expected_tools": ["get_daily_forecast"],
    "first_message": "Will I need an umbrella in Lyon tomorrow?",
    "persona": "busy commuter",
    "criteria": ["The assistant looked up tomorrow's forecast for Lyon", "It says whether rain is expected"],
}


class ScriptedFakeHelper:
    """A scripted fake helper: a fixed generated task; the judge passes per `judge` policy.

    fair: passes a transcript only when tool calls were made (placeholder results are shown as
    "(simulated)"); lax: passes everything; strict: passes nothing.
    """

    name = "scripted-fake-helper"

    def __init__(self, judge: str) -> None:
        self.judge = judge
        self.calls = 0

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        self.calls += 1
        prompt = messages[-1].content
        if "Criteria:" not in prompt:  # the task generator
            allowed = params.json_schema["properties"]["expected_tools"]["items"]["enum"]  # type: ignore[union-attr]
            text = json.dumps({**TASK, "expected_tools": [allowed[0]]})
        else:
            passed = {"fair": "(simulated)" in prompt, "lax": True, "strict": False}[self.judge]
            n = sum(1 for line in prompt.split("Criteria:\n", 1)[1].splitlines() if line[:1].isdigit())
            verdicts = [{"criterion": i, "reason": "scripted", "passed": passed} for i in range(1, n + 1)]
            text = json.dumps({"verdicts": verdicts})
        return Completion(text=text, usage=Usage(prompt_tokens=10, completion_tokens=10))


@pytest.fixture(scope="module")
def weather() -> Any:
    return Registry().load_all()["weather"]


@pytest.mark.parametrize(
    ("judge", "held"),
    [("fair", ["empty", "claim", "gold"]), ("lax", []), ("strict", ["empty", "claim"])],
)
async def test_the_judged_task_gates_keep_only_tasks_a_judge_scores_by_the_work(weather, judge, held) -> None:
    helper = ScriptedFakeHelper(judge)
    task = await TaskGenerator(helper).generate(weather, weather_difficulty(), seed=3, round_id=1)
    results = await run_sim_gates(task, TrajectoryJudge(helper))
    assert [r.gate for r in results if r.held] == held
    # The first gate that does not hold stops the rest (one judge call each).
    assert len(results) == min(3, len(held) + 1)


def weather_difficulty() -> Any:
    from arena.difficulty import Difficulty

    return Difficulty()


async def test_synthesize_writes_gated_simulated_tasks_within_plans_budget(
    make_config, phase_context, plan_output, weather
) -> None:
    from ops.phases.outputs import DifficultyPoint

    config = make_config()
    plan = plan_output(
        {"weather": 2}, simulated={"weather": DifficultyPoint(n=2, difficulty=weather_difficulty())}
    )
    metrics = Metrics()

    async def synthesize(config: Any, store: Any, helper: ScriptedFakeHelper) -> dict[str, Any]:
        ctx = phase_context(config, store, 1, [plan], phase="synthesize", helper=helper, metrics=metrics)
        return await SynthesizePhase().run(ctx)

    async with Store(config.database_url) as store:
        await store.migrate()
        out = await synthesize(config, store, ScriptedFakeHelper("fair"))
        assert [t["origin"] for t in out["tasks"]] == ["simulated", "simulated"]
        assert {t["env"] for t in out["tasks"]} == {"weather"}
        [report] = out["synthesis"]
        assert report["kind"] == "simulated" and report["kept"] == 2 and report["rejections"] == {}
        # A restarted phase reuses the stored tasks: no helper call.
        again = ScriptedFakeHelper("fair")
        rerun = await synthesize(config, store, again)
        assert again.calls == 0 and [t["id"] for t in rerun["tasks"]] == [t["id"] for t in out["tasks"]]
    gate = metrics.synthesis_gate.labels(gate="sim_gold", result="accepted")
    assert gate._value.get() == 2

    # A lax judge: every task is rejected by the empty gate, and nothing is kept.
    config = make_config(ARENA_DATA_DIR=str(config.data.dir.parent / "lax"))
    async with Store(config.database_url) as store:
        await store.migrate()
        out = await synthesize(config, store, ScriptedFakeHelper("lax"))
    assert out["tasks"] == [] and out["synthesis"][0]["rejections"] == {
        "sim_empty": 2 * config.synthesis.max_attempts
    }


async def plan_with_gate(
    phase_context: Any, config: Any, fidelity: dict[str, Any] | None
) -> tuple[dict[str, Any], list[Any]]:
    """PLAN over one executable and one simulated training environment; the stored fidelity row."""
    from arena.store import repo
    from arena.store.fidelity import HelperFidelityRow, save_fidelity
    from ops.phases.outputs import EvaluateOutput
    from ops.phases.plan import PlanPhase

    evaluated = EvaluateOutput(arena=[], training=["banking", "weather"], pass_rates={})
    async with Store(config.database_url) as store:
        await store.migrate()
        if fidelity is not None:
            async with store.transaction() as s:
                row = HelperFidelityRow(helper_id=config.models.helper.identity(), episodes=40, **fidelity)
                await save_fidelity(s, row)
        ctx = phase_context(config, store, 1, [evaluated], phase="plan")
        out = await PlanPhase().run(ctx)
        async with store.transaction() as s:
            await PlanPhase().persist(s, ctx, out)
            events = await repo.list_events(s, 20)
    return out, events


MEASURED = {"false_pass": 0.05, "false_pass_low": 0.01, "false_pass_high": 0.16, "judge_agreement": 0.9}


async def test_the_simulated_training_gate_follows_the_helpers_measured_false_pass_rate(
    make_config, phase_context, tmp_path
) -> None:
    from ops.report import round_record

    simulated = {"ARENA_CURRICULUM__SIMULATED_SHARE": "0.5", "ARENA_CURRICULUM__TASKS_PER_ROUND": "8"}
    # Unmeasured (the default configuration on a fresh store): no budget, an event, and the report says why.
    out, events = await plan_with_gate(phase_context, make_config(**simulated), None)
    assert (
        not out["simulated_training_gate"]["open"]
        and "no measured judge false-pass rate" in out["simulated_training_gate"]["why"]
    )
    assert "weather" not in out["allocation"]["tasks"] and "weather" in out["untrainable"]
    assert any(e.action == "simulated.withheld" for e in events)
    assert (
        "arena bench sim --save"
        in round_record(1, "done", {"plan": out})["plan"]["simulated_training_gate"]["why"]
    )

    # Measured below the limit: half the budget goes to the simulated environment, at its difficulty.
    out, events = await plan_with_gate(
        phase_context, make_config(**simulated, ARENA_DATA_DIR=str(tmp_path / "below")), MEASURED
    )
    assert out["simulated_training_gate"]["open"] and out["simulated_training_gate"]["false_pass"] == 0.05
    assert out["allocation"]["tasks"]["weather"] == 4 and out["simulated"]["weather"]["n"] == 4
    assert not any(e.action == "simulated.withheld" for e in events)

    # The same measurement against a stricter limit: withheld, naming the rate and the limit.
    strict = make_config(
        **simulated, ARENA_SIMULATION__MAX_FALSE_PASS="0.05", ARENA_DATA_DIR=str(tmp_path / "strict")
    )
    out, _ = await plan_with_gate(phase_context, strict, MEASURED)
    assert not out["simulated_training_gate"]["open"] and "0.05" in out["simulated_training_gate"]["why"]
    assert "weather" not in out["allocation"]["tasks"]

    # The gate set to 1 trusts even an unmeasured helper.
    open_gate = make_config(
        **simulated, ARENA_SIMULATION__MAX_FALSE_PASS="1", ARENA_DATA_DIR=str(tmp_path / "open")
    )
    out, _ = await plan_with_gate(phase_context, open_gate, None)
    assert out["simulated_training_gate"]["open"] and out["allocation"]["tasks"]["weather"] == 4


async def test_judge_scored_pass_rates_carry_the_helpers_measured_agreement(
    make_config, phase_context
) -> None:
    """EVALUATE's note for simulated envs, the gauges, and `arena status` beside the pass rate."""
    from arena.store.fidelity import HelperFidelityRow, save_fidelity
    from ops.commands.admin import _render_status
    from ops.phases.simulated_training_gate import helper_fidelity, judge_note

    config = make_config()
    metrics = Metrics()
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = phase_context(config, store, 1, {}, phase="synthesize", helper=None, metrics=metrics)
        unmeasured = judge_note(*await helper_fidelity(ctx))
        assert unmeasured["agreement"] is None and metrics.helper_judge_agreement._value.get() == -1
        async with store.transaction() as s:
            row = HelperFidelityRow(helper_id=config.models.helper.identity(), episodes=40, **MEASURED)
            await save_fidelity(s, row)
        note = judge_note(*await helper_fidelity(ctx))
    assert note["agreement"] == 0.9 and note["false_pass"] == 0.05
    assert metrics.helper_judge_agreement._value.get() == 0.9
    assert metrics.helper_judge_false_pass._value.get() == 0.05
    status = {
        "round": 2,
        "phase": "evaluate",
        "last_pass_rates": {"banking": 0.5, "weather": 0.75},
        "last_pass_rates_judge": {"envs": ["weather"], **note},
    }
    text = _render_status(status)
    [weather] = [line for line in text.splitlines() if "weather" in line]
    assert "judge-scored: agreement 0.90, false-pass 0.05" in weather
    assert "judge" not in next(line for line in text.splitlines() if "banking" in line)
    unmeasured_text = _render_status({**status, "last_pass_rates_judge": {"envs": ["weather"], **unmeasured}})
    assert "judge not measured" in unmeasured_text
