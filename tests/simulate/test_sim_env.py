"""Simulated environments through the real episode runner, with scripted fake models.

`ScriptedFakeChatModel` returns prepared answers (it is not a model): the policy's turns, and the
helper's answers chosen by which simulator is asking. The real model runs these episodes in
test_sim_model.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from arena.env.instance import EnvInstance
from arena.env.loader import load_environment
from arena.env.runtime import Environment
from arena.protocols import UserContext
from arena.tasks.judge import JUDGE_SYSTEM
from arena.tasks.model import RubricCheck, Task
from arena.types import Completion, Message, SamplingParams, ToolSpec
from simulate.simenv import SimulatedInstance, SimulationSettings, run_simulated_episode, tool_score
from simulate.simulators import SimulatorSettings, ToolSimulator
from simulate.simulators.tool import TOOL_SYSTEM
from simulate.simulators.user import USER_SYSTEM

pytestmark = pytest.mark.anyio


class ScriptedFakeChatModel:
    """A fake ChatModel (not a language model): answers come from a script or a function."""

    name = "scripted-fake"

    def __init__(self, answer: list[str] | Callable[[list[Message]], str]) -> None:
        self.answer = answer
        self.requests: list[list[Message]] = []
        self.tools_seen: list[list[str]] = []

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        self.requests.append(messages)
        self.tools_seen.append([t.name for t in tools or []])
        text = self.answer(messages) if callable(self.answer) else self.answer.pop(0)
        return Completion(text=text, model=self.name)


def write_env(root: Path) -> Environment:
    folder = root / "weather_test"
    folder.mkdir()
    (folder / "env.toml").write_text(
        'name = "weather_test"\ntitle = "Weather"\ncategory = ["Utilities", "Weather"]\n'
        'description = "Forecasts and alerts."\nkind = "simulated"\nnow = "2025-03-10T08:00:00"\n'
    )
    tools = [
        {
            "name": "get_forecast",
            "description": "Forecast for a city.",
            "inputSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "annotations": {"readOnlyHint": True},
        },
        {
            "name": "subscribe_alerts",
            "description": "Subscribe to alerts.",
            "inputSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    ]
    (folder / "tools.json").write_text(json.dumps({"tools": tools}))
    return load_environment(folder)


def helper_answers(*, tool_reward: int = 1, judge_passes: bool = True, tool_json: str | None = None):
    def answer(messages: list[Message]) -> str:
        system = messages[0].content
        if system == TOOL_SYSTEM:
            return tool_json or json.dumps(
                {
                    "status": "ok",
                    "result": {"temp_c": 9, "sky": "rain"},
                    "error": "",
                    "tool_reward": tool_reward,
                }
            )
        if system == USER_SYSTEM:
            return json.dumps({"message": "Thanks, that's it.", "done": True})
        assert system == JUDGE_SYSTEM
        n = sum(
            1
            for line in messages[-1].content.split("Criteria:")[1].splitlines()
            if line[:2].rstrip(".").isdigit()
        )
        return json.dumps(
            {
                "verdicts": [
                    {"criterion": i, "reason": "seen", "passed": judge_passes} for i in range(1, n + 1)
                ]
            }
        )

    return answer


TASK = Task(
    id="rain-oslo",
    env="weather_test",
    instruction="Will it rain in Oslo?",
    checks=[RubricCheck(criteria=["Forecast for Oslo fetched", "Answer mentions rain"])],
    origin="simulated",
    difficulty={"tool_subset": "get_forecast"},
)

POLICY_SCRIPT = [
    '<tool_call>{"name": "get_forecast", "arguments": {"city": "Oslo"}}</tool_call>',
    '<tool_call>{"name": "get_forecast", "arguments": {"town": "Oslo"}}</tool_call>',
    "Yes, rain and 9 °C in Oslo.",
]


async def test_episode_end_to_end_with_reward_formula_and_metadata(tmp_path: Path) -> None:
    env = write_env(tmp_path)
    helper = ScriptedFakeChatModel(helper_answers())
    policy = ScriptedFakeChatModel(list(POLICY_SCRIPT))
    result = await run_simulated_episode(policy, env, TASK, helper=helper)
    t, v = result.transcript, result.verdict
    assert t.finish == "answered" and t.final_answer.startswith("Yes, rain")
    assert [c.result.ok for c in t.calls] == [True, False]
    assert t.calls[0].result.output == {"temp_c": 9, "sky": "rain"}
    assert t.calls[1].result.error_kind == "invalid_arguments"
    # The agent only saw the task's tool subset.
    assert policy.tools_seen == [["get_forecast"]] * 3
    meta = t.metadata["simulator"]
    assert meta["model"] == "scripted-fake" and meta["tool_rewards"] == [1, -1]
    assert meta["settings"]["tool"]["seed"] == 0 and meta["settings"]["tool"]["temperature"] == 0.0
    assert meta["tool_simulator_calls"] == 1 and meta["failures"] == []
    # reward = 0.8 * J + 0.2 * T: J = 1 (both criteria), T = mean((1+1)/2, (-1+1)/2) = 0.5
    assert v.reward == pytest.approx(0.8 + 0.2 * 0.5) and v.passed
    assert [c.name for c in v.checks] == ["Forecast for Oslo fetched", "Answer mentions rain"]
    assert tool_score([]) == 0.0
    # The transcript with its metadata round-trips through JSON (what the store keeps).
    assert type(t).model_validate_json(t.model_dump_json()).metadata == t.metadata


async def test_subset_is_what_the_agent_sees(tmp_path: Path) -> None:
    env = write_env(tmp_path)
    instance = SimulatedInstance(
        env, ToolSimulator(ScriptedFakeChatModel([])), intent="x", tools=["get_forecast"]
    )
    assert isinstance(instance, EnvInstance)
    assert [s.name for s in instance.tool_specs] == ["get_forecast"]
    unknown = await instance.call("subscribe_alerts", {"city": "Oslo"})
    assert unknown.error_kind == "unknown_tool" and not unknown.ok


async def test_a_failing_tool_simulator_is_recorded_on_the_episode(tmp_path: Path) -> None:
    env = write_env(tmp_path)
    helper = ScriptedFakeChatModel(helper_answers(tool_json='{"status": "ok", "result": '))
    settings = SimulationSettings(tool=SimulatorSettings(attempts=2))
    result = await run_simulated_episode(
        ScriptedFakeChatModel(list(POLICY_SCRIPT)), env, TASK, helper=helper, settings=settings
    )
    t, v = result.transcript, result.verdict
    assert t.finish == "env_error"
    assert "SimulatorError: tool simulator gave no valid output after 2 attempts" in t.finish_detail
    assert t.metadata["simulator"]["failures"] and not v.passed and v.reward == 0.0
    assert "env_error" in v.checks[0].detail


async def test_conversational_episode_ends_with_the_user_stop_and_judge_failure_is_clear(
    tmp_path: Path,
) -> None:
    env = write_env(tmp_path)
    task = TASK.model_copy(
        update={
            "mode": "conversational",
            "user": UserContext(intent="Know if it rains in Oslo", persona="commuter"),
        }
    )
    helper = ScriptedFakeChatModel(helper_answers(judge_passes=False))
    policy = ScriptedFakeChatModel([POLICY_SCRIPT[0], "It will rain in Oslo."])
    result = await run_simulated_episode(policy, env, task, helper=helper)
    t, v = result.transcript, result.verdict
    assert t.finish == "user_stop" and t.metadata["simulator"]["user_simulator_calls"] == 1
    assert not v.passed and v.reward == pytest.approx(0.2)  # J = 0, T = 1


async def test_a_failing_user_simulator_is_recorded_on_the_episode(tmp_path: Path) -> None:
    env = write_env(tmp_path)
    task = TASK.model_copy(
        update={"mode": "conversational", "user": UserContext(intent="Know if it rains in Oslo")}
    )
    answers = helper_answers()

    def helper(messages: list[Message]) -> str:
        # The user simulator answers with a schema violation every time.
        return '{"message": 5, "done": false}' if messages[0].content == USER_SYSTEM else answers(messages)

    policy = ScriptedFakeChatModel(["Which city do you mean?"])
    result = await run_simulated_episode(policy, env, task, helper=ScriptedFakeChatModel(helper))
    t = result.transcript
    assert t.finish == "env_error"
    assert t.finish_detail.startswith(
        "user simulator: SimulatorError: user simulator gave no valid output after 3"
    )
    assert "schema violation at message" in t.finish_detail
    assert t.metadata["simulator"]["failures"] == [t.finish_detail] and result.verdict.reward == 0.0
