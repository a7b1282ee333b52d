"""Tool-graph motifs: what an environment's tools can exercise, what a task exercises, targeted walks."""

from __future__ import annotations

import pytest

from arena.difficulty import Difficulty
from arena.synth.graph_tasks import synthesize_graph_tasks
from arena.synth.motifs import env_motif_tools, motif_difficulty, task_motifs
from arena.synth.targeted import Guideline, synthesize_targeted
from arena.tasks.model import AnswerCheck, StateMatchCheck, Task, UserContext
from arena.types import ToolCall

pytestmark = pytest.mark.anyio


def make(reference: list[tuple[str, dict]], *, answer: bool = False, conversational: bool = False) -> Task:
    checks = [StateMatchCheck(), *([AnswerCheck(contains=["x"])] if answer else [])]
    return Task(
        id="t1",
        env="food_delivery",
        instruction="help",
        reference=[ToolCall(name=n, arguments=a) for n, a in reference],
        checks=checks,
        mode="conversational" if conversational else "autonomous",
        user=UserContext(intent="x") if conversational else None,
    )


WRITES = {"cancel_order", "update_tip"}


def test_task_motifs_read_the_reference_calls() -> None:
    chain = make([("get_order", {"order_id": "O-1"}), ("cancel_order", {"order_id": "O-1"})])
    assert task_motifs(chain, WRITES) == ["id_chaining"]
    # A write without a read before it chains nothing; two writes are multi_write.
    assert task_motifs(make([("cancel_order", {"order_id": "O-1"})]), WRITES) == []
    two = make([("cancel_order", {"order_id": "O-1"}), ("update_tip", {"order_id": "O-1", "tip": 2})])
    assert task_motifs(two, WRITES) == ["multi_write"]
    lookup = make([("search_restaurants", {"query": "thai", "cuisine": "Thai"})], answer=True)
    assert task_motifs(lookup, WRITES) == ["non_key_lookup", "multi_constraint_filter", "aggregation"]
    # Paging is no constraint; an id argument makes the search a keyed read.
    assert task_motifs(make([("search_restaurants", {"limit": 3})]), WRITES) == []
    assert task_motifs(make([("get_menu", {"restaurant_id": "R-1"})], answer=True), WRITES) == []
    talk = make([("cancel_order", {"order_id": "O-1"})], conversational=True)
    assert task_motifs(talk, WRITES) == ["confirm_with_user"]


def test_env_motif_tools_come_from_tool_schemas(bundled_envs) -> None:
    tools = env_motif_tools(bundled_envs["food_delivery"])
    assert "search_restaurants" in tools["non_key_lookup"]
    assert "cancel_order" in tools["id_chaining"] and "add_address" not in tools["id_chaining"]
    assert "get_menu" not in tools["aggregation"]  # it needs a restaurant id
    assert env_motif_tools(bundled_envs["weather"]) == {}  # simulated: no graph to walk


def test_motif_difficulty_only_raises_what_the_motif_needs() -> None:
    base = Difficulty(walk_length=1, ambiguity=1)
    assert motif_difficulty("id_chaining", base) == Difficulty(walk_length=2, ambiguity=1)
    assert motif_difficulty("confirm_with_user", base).conversational == 1
    assert motif_difficulty("aggregation", Difficulty(walk_length=4)).walk_length == 1
    assert motif_difficulty("non_key_lookup", base) == base


async def test_targeted_motif_walks_exercise_the_motif_far_more_than_plain_ones(bundled_envs) -> None:
    env = bundled_envs["food_delivery"]
    motif = "non_key_lookup"
    guideline = Guideline(
        env=env.name,
        motif=motif,
        target_tools=env_motif_tools(env)[motif],
        difficulty=motif_difficulty(motif, Difficulty()),
        n_tasks=12,
    )
    targeted = await synthesize_targeted(env, guideline, seed=3)
    plain = await synthesize_graph_tasks(env, 12, seed=3)

    def share(tasks: list[Task]) -> float:
        return sum(motif in task_motifs(t, env.write_tools) for t in tasks) / max(1, len(tasks))

    assert len(targeted.tasks) >= 8
    assert share(targeted.tasks) >= 0.6 and share(targeted.tasks) >= share(plain.tasks) + 0.4
