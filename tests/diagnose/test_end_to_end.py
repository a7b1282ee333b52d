"""End to end: an injected failure in one environment → it ranks first → next round's tasks target it.

Episodes run real tools of bundled environments (the agent's calls are scripted, the results and
state diffs are real). The helper is `ScriptedCapableHelper`, a scripted fake (not a model) that
behaves like a capable diagnostician: it computes aggregates with the sandboxed Python tool and
writes its report from what that returns. The report then drives the curriculum allocation and
the real graph synthesis, compared with a run without the report.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from arena.env.registry import bundled_env_dirs, load_environment
from arena.episode.transcript import CallRecord, Transcript, TurnRecord
from arena.sandbox import SandboxPool
from arena.synth.graph_tasks import synthesize_graph_tasks
from arena.synth.targeted import synthesize_targeted
from arena.tasks.model import StateMatchCheck, Task
from arena.tasks.reward import CheckResult, Verdict
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec, Usage
from curriculum.sampling import EnvCandidate, allocate_tasks
from curriculum.state import CurriculumConfig, CurriculumState
from diagnose.agent import run_diagnosis
from diagnose.evidence import EnvMeta, EpisodeInput, build_evidence, replay_diffs
from diagnose.wiring import apply_weakness, synthesis_requests, weakness_from_report

pytestmark = pytest.mark.anyio

WEAK = "food_delivery"
OTHERS = ("banking", "library", "calendar")

ANALYSIS = """
from collections import Counter, defaultdict
fails, tools, ids = defaultdict(Counter), defaultdict(Counter), defaultdict(list)
for e in data["episodes"]:
    if not e["passed"]:
        fails[e["env"]][e["failure"]] += 1
        tools[e["env"]].update(e["failure_tools"])
        ids[e["env"]].append(e["episode_id"])
rates = {g["env"]: g["pass_rate"] for g in data["envs"]}
result = {
    env: {"pass_rate": rates[env], "failures": dict(c), "tools": [t for t, _ in tools[env].most_common(2)],
          "ids": ids[env][:3]}
    for env, c in fails.items()
}
"""


class ScriptedCapableHelper:
    """A scripted fake helper (not a model): one python analysis, then a report built from its output."""

    name = "scripted-capable-helper"

    def __init__(self) -> None:
        self.calls = 0

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        self.calls += 1
        if self.calls == 1:
            call = json.dumps({"name": "python", "arguments": {"code": ANALYSIS}})
            return Completion(
                text=f"<tool_call>{call}</tool_call>", usage=Usage(prompt_tokens=900, completion_tokens=120)
            )
        observation = messages[-1].content
        stats: dict[str, Any] = json.loads(re.search(r"result = (\{.*\})", observation, re.S).group(1))  # type: ignore[union-attr]
        ranked = sorted(stats.items(), key=lambda kv: kv[1]["pass_rate"])
        report = {
            "summary": f"{ranked[0][0]} fails most",
            "weak_envs": [
                {"env": env, "score": round(1 - s["pass_rate"], 3), "evidence": f"failures {s['failures']}"}
                for env, s in ranked
            ],
            "patterns": [
                {
                    "category": max(s["failures"], key=s["failures"].get),
                    "env": env,
                    "description": "recurring failure",
                    "tools": s["tools"],
                    "episode_ids": s["ids"],
                }
                for env, s in ranked
            ],
            "guidelines": [
                {
                    "env": env,
                    "failure_pattern": "acts on another record than the one the user names",
                    "target_tools": s["tools"] or ["get_order"],
                    "skill": "identify the record before changing it",
                    "n_tasks": 6,
                }
                for env, s in ranked
            ],
        }
        return Completion(text=json.dumps(report), usage=Usage(prompt_tokens=1500, completion_tokens=300))


async def _episode(
    env: Any, task: Task, calls: list[tuple[str, dict[str, Any]]], eid: str, passed: bool
) -> EpisodeInput:
    inst = env.new_instance()
    try:
        records = [
            CallRecord(turn=i, call=ToolCall(name=n, arguments=a), result=await inst.call(n, dict(a)))
            for i, (n, a) in enumerate(calls)
        ]
    finally:
        await inst.aclose()
    tr = Transcript(
        task_id=task.id,
        env=env.name,
        calls=records,
        final_answer="Done, all set.",
        turns=[TurnRecord(index=i, text="", content="") for i in range(len(calls) + 1)],
    )
    checks = [CheckResult(kind="state_match", name="state", passed=passed)]
    agent_diff, expected_diff = await replay_diffs(env, task, tr)
    return EpisodeInput(
        episode_id=eid,
        env=env.name,
        task=task,
        transcript=tr,
        verdict=Verdict(reward=float(passed), passed=passed, checks=checks),
        agent_diff=agent_diff,
        expected_diff=expected_diff,
    )


async def _round(envs: dict[str, Any]) -> list[EpisodeInput]:
    from arena.tasks import load_tasks

    tip = Task(
        id="tip-ord-1003",
        env=WEAK,
        instruction="Please set the tip on ORD-1003 to 10 dollars.",
        reference=[
            ToolCall(name="get_order", arguments={"order_id": "ORD-1003"}),
            ToolCall(name="update_tip", arguments={"order_id": "ORD-1003", "tip": 10}),
        ],
        checks=[StateMatchCheck()],
    )
    wrong = [("get_order", {"order_id": "ORD-1003"}), ("update_tip", {"order_id": "ORD-1002", "tip": 10})]
    eps = [await _episode(envs[WEAK], tip, wrong, f"{WEAK}/{tip.id}#{i}", False) for i in range(6)]
    right = [(c.name, c.arguments) for c in tip.reference]
    eps += [await _episode(envs[WEAK], tip, right, f"{WEAK}/{tip.id}#{i}", True) for i in (6, 7)]
    for name in OTHERS:
        tasks = [
            t for t in load_tasks(envs[name].path, name, tools=envs[name].tools) if t.mode == "autonomous"
        ][:4]
        for i, t in enumerate(tasks):
            calls = [(c.name, c.arguments) for c in t.reference]
            passed = not (name == "banking" and i == 0)  # one failure elsewhere: the weak env must still win
            eps.append(
                await _episode(envs[name], t, calls if passed else calls[:1], f"{name}/{t.id}#0", passed)
            )
    return eps


def _share(tasks: list[Task], tools: list[str]) -> float:
    return sum(any(c.name in tools for c in t.reference) for t in tasks) / max(1, len(tasks))


async def test_injected_failure_drives_allocation_and_synthesis() -> None:
    envs = {e.name: e for e in (load_environment(d) for d in bundled_env_dirs()) if e.name in (WEAK, *OTHERS)}
    episodes = await _round(envs)
    meta = {n: EnvMeta.from_environment(e) for n, e in envs.items()}
    evidence = build_evidence(1, episodes, meta)
    assert evidence.env_stats(WEAK).failures == {"wrong_entity": 6}  # type: ignore[union-attr]

    async with SandboxPool(workers=1) as pool:
        report = await run_diagnosis(evidence, episodes, helper=ScriptedCapableHelper(), sandbox=pool)
    assert report.source == "agent", report.fallback_reason
    assert report.weak[0] == WEAK and report.usage.python_runs == 1
    guideline = next(g for g in report.guidelines if g.env == WEAK)
    assert "update_tip" in guideline.target_tools

    # Curriculum: the report's weakness raises the weak environment's share of the task budget.
    weakness = weakness_from_report(report)
    assert weakness[WEAK] == 1.0 and all(v < 1.0 for k, v in weakness.items() if k != WEAK)
    candidates = [
        EnvCandidate(name=n, kind="executable", category=meta[n].top_category) for n in sorted(envs)
    ]
    config = CurriculumConfig(beta=2.0)
    state = CurriculumState()
    with_report = allocate_tasks(state, apply_weakness(candidates, report), 40, config, seed=1)
    without = allocate_tasks(state, candidates, 40, config, seed=1)
    share_with, share_without = with_report.tasks[WEAK] / 40, without.tasks[WEAK] / 40
    assert share_with >= share_without + 0.1, (share_with, share_without)

    # Synthesis: the guideline (sized by the allocation) steers real graph synthesis to its tools.
    request = next(r for r in synthesis_requests(report, allocation=with_report) if r.env == WEAK)
    assert request.n_tasks == with_report.tasks[WEAK]
    request = request.model_copy(update={"n_tasks": 10})  # keep the test fast
    targeted = await synthesize_targeted(envs[WEAK], request, seed=5)
    plain = await synthesize_graph_tasks(envs[WEAK], 10, seed=5)
    assert len(targeted.tasks) >= 6 and all(t.origin == "targeted" for t in targeted.tasks)
    tools = [t for t in request.target_tools if t != "get_order"]  # get_order appears everywhere anyway
    assert _share(targeted.tasks, tools) >= _share(plain.tasks, tools) + 0.3
