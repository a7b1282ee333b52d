"""The diagnosis agent's control flow with a scripted fake helper (not a model) and the real sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace

import anyio
import pytest

from arena.protocols import ModelError
from arena.sandbox import SandboxPool
from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage
from diagnose.agent import DiagnosisConfig, build_prompt, run_diagnosis
from diagnose.evidence import EpisodeInput, Evidence, build_evidence

pytestmark = pytest.mark.anyio

Step = str | Callable[[list[Message]], str] | Exception


class ScriptedFakeHelper:
    """A fake helper LLM for control-flow tests: replays fixed answers (or raises), records requests."""

    name = "scripted-fake-helper"

    def __init__(self, steps: list[Step], delay: float = 0.0) -> None:
        self.steps = list(steps)
        self.delay = delay
        self.requests: list[tuple[list[Message], list[ToolSpec] | None, SamplingParams | None]] = []

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        self.requests.append((list(messages), tools, params))
        if self.delay:
            await anyio.sleep(self.delay)
        step = self.steps.pop(0) if self.steps else "no more answers"
        if isinstance(step, Exception):
            raise step
        text = step(messages) if callable(step) else step
        return Completion(text=text, usage=Usage(prompt_tokens=100, completion_tokens=50))


def _evidence(b: SimpleNamespace) -> tuple[Evidence, list[EpisodeInput]]:
    wrong = [
        b.call("get_order", {"order_id": "O-2"}),
        b.call("cancel_order", {"order_id": "O-2"}, writes=True),
    ]
    good = [
        b.call("get_order", {"order_id": "O-1"}),
        b.call("cancel_order", {"order_id": "O-1"}, writes=True),
    ]
    eps = [b.episode(f"shop/t1#{i}", b.transcript(wrong), b.verdict()) for i in range(4)]
    eps.append(b.episode("shop/t1#4", b.transcript(good), b.verdict(True)))
    bank_task = b.task("bank", reference=[("list_accounts", {})], tid="b1")
    ok = b.transcript([b.call("list_accounts")], env="bank")
    eps += [b.episode(f"bank/b1#{i}", ok, b.verdict(True), bank_task, env="bank") for i in range(4)]
    return build_evidence(2, eps, {"shop": b.SHOP, "bank": b.BANK}), eps


def good_report(env: str = "shop") -> str:
    return json.dumps(
        {
            "summary": "The agent cancels the wrong orders.",
            "weak_envs": [{"env": env, "score": 0.9, "evidence": "4 of 5 failed with wrong_entity"}],
            "patterns": [
                {
                    "category": "wrong_entity",
                    "env": env,
                    "description": "cancels an order other than the one named",
                    "tools": ["cancel_order"],
                    "episode_ids": ["shop/t1#0", "shop/t1#1"],
                }
            ],
            "guidelines": [
                {
                    "env": env,
                    "failure_pattern": "wrong order cancelled",
                    "target_tools": ["get_order", "cancel_order"],
                    "skill": "identify the order the user names",
                    "difficulty": {"walk_length": 2, "ambiguity": 1},
                    "n_tasks": 6,
                }
            ],
        }
    )


async def test_agent_uses_python_then_reports(b: SimpleNamespace) -> None:
    ev, eps = _evidence(b)
    code = "import collections\nresult = collections.Counter(e['failure'] for e in data['episodes'] if e['failure'])"

    def check_observation(messages: list[Message]) -> str:
        tool_msg = messages[-1]
        assert tool_msg.role == "tool" and '"wrong_entity": 4' in tool_msg.content
        return "```json\n" + good_report() + "\n```"

    helper = ScriptedFakeHelper(
        [
            '<tool_call>{"name": "python", "arguments": {"code": ' + json.dumps(code) + "}}</tool_call>",
            check_observation,
        ]
    )
    async with SandboxPool(workers=1) as pool:
        report = await run_diagnosis(ev, eps, helper=helper, sandbox=pool)
    assert report.source == "agent" and report.fallback_reason is None
    assert report.weak == ["shop"] and report.weak_envs[0].pass_rate == 0.2
    assert report.guidelines[0].target_tools == ["get_order", "cancel_order"]
    assert report.usage.python_runs == 1 and report.usage.calls == 2 and report.usage.tokens == 300
    # The first request offered the python tool; the prompt carries stats, tools and traces.
    messages, tools, _ = helper.requests[0]
    assert tools is not None and tools[0].name == "python"
    assert "shop/t1#0" in messages[1].content and "cancel_order*" in messages[1].content


async def test_invalid_reports_fall_back_with_the_reason(b: SimpleNamespace) -> None:
    ev, eps = _evidence(b)
    bad = good_report().replace('"cancel_order"]', '"refund_order"]')
    helper = ScriptedFakeHelper([good_report("casino"), bad])
    report = await run_diagnosis(ev, eps, helper=helper, config=DiagnosisConfig(max_calls=2))
    assert report.source == "fallback"
    assert "call budget spent" in (report.fallback_reason or "")
    assert "has no tool 'refund_order'" in (report.fallback_reason or "")
    assert report.weak[0] == "shop"  # the statistical ranking still finds it
    # The second call saw the problems of the first answer; without a sandbox every call is constrained.
    assert "unknown environment 'casino'" in helper.requests[1][0][-1].content
    assert all(p is not None and p.json_schema is not None for _, _, p in helper.requests)


async def test_agent_repairs_its_report_after_feedback(b: SimpleNamespace) -> None:
    ev, eps = _evidence(b)
    helper = ScriptedFakeHelper(["not json at all", good_report()])
    report = await run_diagnosis(ev, eps, helper=helper)
    assert report.source == "agent" and report.usage.calls == 2


@pytest.mark.parametrize(
    ("steps", "config", "delay", "reason"),
    [
        ([ModelError("backend down")], DiagnosisConfig(), 0.0, "helper model failed: backend down"),
        (["{}"] * 5, DiagnosisConfig(max_tokens=300), 0.0, "token budget spent"),
        ([good_report()], DiagnosisConfig(max_seconds=0.2), 5.0, "time budget spent"),
    ],
)
async def test_budgets_and_model_errors_fall_back(
    b: SimpleNamespace, steps: list[Step], config: DiagnosisConfig, delay: float, reason: str
) -> None:
    ev, eps = _evidence(b)
    report = await run_diagnosis(ev, eps, helper=ScriptedFakeHelper(steps, delay), config=config)
    assert report.source == "fallback"
    assert reason in (report.fallback_reason or "")
    assert report.weak == ["shop"]


async def test_no_helper_or_no_failures(b: SimpleNamespace) -> None:
    ev, eps = _evidence(b)
    report = await run_diagnosis(ev, eps, helper=None)
    assert report.fallback_reason == "no helper model configured"
    passing = [e for e in eps if e.verdict.passed]
    ev2 = build_evidence(2, passing, ev.envs_meta)
    report = await run_diagnosis(ev2, passing, helper=ScriptedFakeHelper([]))
    assert report.fallback_reason == "no failed episode to diagnose" and report.weak == []


def test_prompt_fits_the_trace_budget(b: SimpleNamespace) -> None:
    ev, eps = _evidence(b)
    small = build_prompt(ev, eps, DiagnosisConfig(trace_tokens=220, per_trace_tokens=220))
    large = build_prompt(ev, eps, DiagnosisConfig(trace_tokens=2200, per_trace_tokens=220))
    assert small.count("episode shop/") == 1 and large.count("episode shop/") == 4
