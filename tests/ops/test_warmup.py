"""The warm-up set a fresh policy imitates: training environments only, grounded, never the yardstick's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arena.store import Store, YardstickTaskRow, repo_yardstick
from ops.phases.runtime import load_envs
from ops.phases.warmup import handwritten, in_turn, training_envs, warmup_tasks

pytestmark = pytest.mark.anyio


async def test_the_warm_up_set_is_grounded_gated_and_from_training_environments(
    make_config, phase_context
) -> None:
    config = make_config(ARENA_TRAINER__WARMUP_TASKS_PER_ENV="3")
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = phase_context(config, store, phase="train")
        envs = load_envs(ctx)
        tasks, reports = await warmup_tasks(ctx, envs, ["banking", "hotels", "weather"])
    by_env: dict[str, list] = {}
    for task in tasks:
        by_env.setdefault(task.env, []).append(task)
    # weather is simulated: nothing to replay, nothing to imitate.
    assert set(by_env) == {"banking", "hotels"}
    for name in ("banking", "hotels"):
        hand = handwritten(envs[name])
        synthesized = [t for t in by_env[name] if t.origin == "graph"]
        assert len(by_env[name]) == len(hand) + 3 and len(synthesized) == 3
        # Walks of one to three calls whose ids all come from the instruction or a look-up.
        assert all(1 <= len(t.reference) <= 3 for t in synthesized)
        assert {t.difficulty["walk_length"] for t in synthesized} == {1, 2, 3}
    assert reports and {r["env"] for r in reports} == {"banking", "hotels"}


async def test_yardstick_environments_never_warm_up(make_config, phase_context) -> None:
    config = make_config()
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = phase_context(config, store, phase="train")
        envs = load_envs(ctx)
        before = await training_envs(ctx, envs)
        held = before[0]
        async with store.transaction() as s:
            await repo_yardstick.add_tasks(
                s, [YardstickTaskRow(id=f"{held}/ys-1", env=held, level="easy", version=1, data={})]
            )
        after = await training_envs(ctx, envs)
    assert held not in after and set(after) == set(before) - {held}


def test_a_capped_set_takes_tasks_in_turn_from_every_environment() -> None:
    tasks = [SimpleNamespace(env=e, id=f"{e}{i}") for e in ("a", "b", "c") for i in range(4)]
    picked = in_turn(tasks, 5)
    assert [t.id for t in picked] == ["a0", "b0", "c0", "a1", "b1"]
    assert in_turn(tasks, None) == tasks and in_turn(tasks, 99) == tasks
