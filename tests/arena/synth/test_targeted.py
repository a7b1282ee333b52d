"""Targeted synthesis shifts the tasks toward the guideline's tools."""

from __future__ import annotations

import pytest

from arena.difficulty import Difficulty
from arena.synth.graph_tasks import synthesize_graph_tasks
from arena.synth.targeted import Guideline, synthesize_targeted

pytestmark = pytest.mark.anyio


def _share(tasks, tool: str) -> float:
    return sum(any(c.name == tool for c in t.reference) for t in tasks) / max(1, len(tasks))


@pytest.mark.parametrize(("env_name", "tool"), [("food_delivery", "update_tip"), ("calendar", "get_event")])
async def test_targeted_request_shifts_tasks_toward_the_tool(bundled_envs, env_name: str, tool: str) -> None:
    env = bundled_envs[env_name]
    guideline = Guideline(
        env=env_name, failure_pattern="forgets to look up before acting", target_tools=[tool], n_tasks=20
    )
    targeted = await synthesize_targeted(env, guideline, seed=7)
    plain = await synthesize_graph_tasks(env, 20, seed=7)
    assert len(targeted.tasks) >= 15 and all(t.origin == "targeted" for t in targeted.tasks)
    assert all(t.id.startswith("t-s7-") for t in targeted.tasks)
    assert _share(targeted.tasks, tool) >= _share(plain.tasks, tool) + 0.3


async def test_guideline_errors_are_clear(bundled_envs) -> None:
    env = bundled_envs["food_delivery"]
    with pytest.raises(ValueError, match="unknown tool"):
        await synthesize_targeted(env, Guideline(env="food_delivery", target_tools=["fly_to_moon"]))
    with pytest.raises(ValueError, match="not 'food_delivery'"):
        await synthesize_targeted(env, Guideline(env="hotels"))
    g = Guideline(
        env="food_delivery", target_tools=["cancel_order"], difficulty=Difficulty(walk_length=3), n_tasks=3
    )
    res = await synthesize_targeted(env, g)
    assert all(t.difficulty["walk_length"] == 3 for t in res.tasks)
