"""The simulators with the real embedded model (SmolLM2-135M, loaded once per session).

Quality is what a 135M model gives; validity is what these tests require: 20 different prompts
per simulator, sent concurrently so the local backend batches them, every answer schema-valid
(constrained decoding plus validation and retries). Outputs are kept short so the whole file
stays within the real-model time budget. One whole simulated episode runs with the real model as
policy and as every simulator.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from arena.difficulty import Difficulty
from arena.env.registry import Registry
from arena.episode.runner import EpisodeConfig
from arena.protocols import UserContext
from arena.tasks.model import RubricCheck, Task
from arena.tasks.transcript import ReplayTranscript
from arena.types import Message, SamplingParams
from simulate.simenv import SimulationSettings, run_simulated_episode
from simulate.simulators import (
    SimulatedUser,
    SimulatorSettings,
    TaskGenerator,
    ToolMemory,
    ToolSimulator,
    TrajectoryJudge,
    reset_simulator_counts,
    simulator_counts,
)

# About 2 minutes on a 2-core CPU: each simulator's 20 prompts share its instructions, which the
# local backend's batched decode runs once (simulate.decoding's shared prefix).
pytestmark = [pytest.mark.anyio, pytest.mark.model]

CITIES = [
    "Oslo", "Lima", "Cairo", "Perth", "Quito", "Hanoi", "Dakar", "Riga", "Porto", "Accra",
    "Seoul", "Turin", "Omaha", "Split", "Bern", "Fargo", "Nice", "Pune", "Kyiv", "Reno",
]  # fmt: skip


def registry_env(name: str) -> Any:
    return Registry(include_environ=False).get(name)


async def gather(n: int, fn: Any) -> list[Any]:
    out: list[Any] = [None] * n

    async def one(i: int) -> None:
        out[i] = await fn(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return out


async def test_tool_simulator_twenty_prompts_valid(local_model) -> None:
    spec = {s.name: s for s in registry_env("weather").tool_specs}["get_current_weather"]
    tool = ToolSimulator(local_model, SimulatorSettings(max_tokens=64), max_fields=2, max_chars=20)

    async def one(i: int) -> Any:
        intent = f"Know the weather in {CITIES[i]}"
        return await tool.simulate(
            spec, {"location": CITIES[i]}, intent=intent, memory=ToolMemory(), writes=False
        )

    reset_simulator_counts()
    outcomes = await gather(20, one)
    assert all(o.reward in (-1, 0, 1) for o in outcomes)
    assert all(
        (o.ok and isinstance(o.output, dict) and len(o.output) <= 2) or (not o.ok and o.error)
        for o in outcomes
    )
    assert simulator_counts().get(("tool", "ok"), 0) == 20


async def test_user_simulator_twenty_prompts_valid(local_model) -> None:
    user = SimulatedUser(local_model, SimulatorSettings(max_tokens=48), max_chars=60)

    async def one(i: int) -> Any:
        ctx = UserContext(
            intent=f"Book a taxi to the {CITIES[i]} airport at 9am", persona="traveller", ambiguity=0.5
        )
        convo = [
            Message(role="user", content="I need a ride."),
            Message(role="assistant", content="Sure, where to and when?"),
        ]
        return await user.reply(ctx, convo)

    turns = await gather(20, one)
    assert all(t.content.strip() and len(t.content) <= 60 for t in turns)


async def test_judge_twenty_prompts_valid(local_model) -> None:
    judge = TrajectoryJudge(local_model, SimulatorSettings(max_tokens=48), reason_chars=24)

    async def one(i: int) -> Any:
        transcript = ReplayTranscript(
            messages=[
                Message(role="user", content=f"Weather in {CITIES[i]}?"),
                Message(role="assistant", content=f"It is sunny in {CITIES[i]}."),
            ],
            final_answer=f"It is sunny in {CITIES[i]}.",
        )
        return await judge.score(
            f"Know the weather in {CITIES[i]}", transcript, ["The agent gave a forecast"]
        )

    scores = await gather(20, one)
    assert all(len(s.criteria) == 1 and s.overall in (0.0, 1.0) for s in scores)


async def test_task_generator_twenty_prompts_valid(local_model) -> None:
    envs = [registry_env(n) for n in ("weather", "ride_hailing", "music_streaming", "recipes", "news")]
    gen = TaskGenerator(
        local_model, SimulatorSettings(max_tokens=160, temperature=0.7), short=40, max_criteria=1
    )

    async def one(i: int) -> Task:
        diff = Difficulty(walk_length=1 + i % 2, ambiguity=i % 3, conversational=i % 2)
        return await gen.generate(envs[i % len(envs)], diff, seed=i)

    tasks = await gather(20, one)
    assert len({t.id for t in tasks}) == 20
    for t in tasks:
        assert t.origin == "simulated" and t.user is not None and t.instruction
        assert isinstance(t.checks[0], RubricCheck) and t.difficulty["tool_subset"]
        assert set(str(t.difficulty["expected_tools"]).split(",")) <= set(
            str(t.difficulty["tool_subset"]).split(",")
        )


async def test_simulated_episodes_end_to_end_with_the_real_model(local_model) -> None:
    env = registry_env("weather")
    task = Task(
        id="oslo-now",
        env="weather",
        instruction="What is the weather in Oslo right now?",
        checks=[RubricCheck(criteria=["The agent reports the weather in Oslo"])],
        origin="simulated",
        difficulty={"tool_subset": "get_current_weather"},
    )
    chatty = task.model_copy(
        update={
            "id": "oslo-chat",
            "mode": "conversational",
            "user": UserContext(intent="Know if Oslo is warm today"),
        }
    )
    settings = SimulationSettings(
        tool=SimulatorSettings(max_tokens=64),
        user=SimulatorSettings(max_tokens=48),
        judge=SimulatorSettings(max_tokens=64),
        max_user_turns=2,
    )
    config = EpisodeConfig(max_turns=3, max_tokens_per_turn=40, params=SamplingParams(max_tokens=40))
    results = await gather(
        2,
        lambda i: run_simulated_episode(
            local_model, env, [task, chatty][i], helper=local_model, settings=settings, config=config
        ),
    )
    for r in results:
        t = r.transcript
        assert t.finish in ("answered", "user_stop", "max_turns", "max_tokens", "format_error"), (
            t.finish_detail
        )
        assert t.metadata["simulator"]["model"] == local_model.name
        assert t.metadata["simulator"]["settings"]["tool"]["max_tokens"] == 64
        assert 0.0 <= r.verdict.reward <= 1.0 and r.verdict.checks
        assert all(c.detail for c in r.verdict.checks)
