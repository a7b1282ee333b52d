"""The gates pipeline: dedup and the solvability filter with a reference agent."""

from __future__ import annotations

import json

import pytest

from arena.synth.cost import SynthesisReport
from arena.synth.filters import GateConfig, TaskFilter, reference_key
from arena.synth.graph_tasks import synthesize_graph_tasks
from arena.types import Completion, Message, SamplingParams, ToolSpec

pytestmark = pytest.mark.anyio


class ScriptedFakeReferenceAgent:
    """Plays the reference solution of the task whose instruction it is given (or nothing at all)."""

    name = "scripted-fake-reference-agent"

    def __init__(self, tasks, *, solve: bool) -> None:
        self.by_instruction = {t.instruction: t for t in tasks}
        self.solve = solve

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        task = self.by_instruction[next(m.content for m in messages if m.role == "user")]
        done = sum(m.role == "tool" for m in messages)
        if self.solve and done < len(task.reference):
            call = task.reference[done]
            payload = json.dumps({"name": call.name, "arguments": call.arguments})
            return Completion(text=f"<tool_call>{payload}</tool_call>")
        return Completion(text=task.answer if self.solve else "I cannot help with that.")


async def test_solvability_keeps_tasks_a_reference_agent_solves(bundled_envs) -> None:
    env = bundled_envs["food_delivery"]
    tasks = (await synthesize_graph_tasks(env, 3, seed=11)).tasks
    assert tasks
    config = GateConfig(solvability_runs=5, solvability_min_passes=2, dedup=False)
    good = TaskFilter(env, config, agent=ScriptedFakeReferenceAgent(tasks, solve=True))
    lazy_report = SynthesisReport(env=env.name, kind="graph")
    lazy = TaskFilter(env, config, agent=ScriptedFakeReferenceAgent(tasks, solve=False), report=lazy_report)
    for task in tasks:
        assert await good.check(task) is None
        assert await lazy.check(task) == "solvability"
    assert lazy_report.rejections == {"solvability": len(tasks)}


async def test_duplicates_are_rejected_and_counted(bundled_envs) -> None:
    env = bundled_envs["library"]
    task = (await synthesize_graph_tasks(env, 1, seed=2)).tasks[0]
    report = SynthesisReport(env=env.name, kind="graph")
    gate = TaskFilter(env, report=report)
    assert await gate.check(task) is None
    twin = task.model_copy(update={"id": "other", "instruction": "Something else entirely, please."})
    assert reference_key(twin) == reference_key(task)
    assert await gate.check(twin) == "duplicate"
    assert report.rejections == {"duplicate": 1}
