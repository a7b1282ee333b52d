"""EVALUATE once the curriculum has made tasks conversational, on the real embedded model.

The curriculum raises the `conversational` knob when a policy masters the structural ones; from
then on the synthesized tasks open with a greeting and reveal their intent through a simulated
user. The daemon must give those episodes one (the helper model), or every EVALUATE fails and
the daemon retries it forever.
"""

from __future__ import annotations

import pytest

from arena.difficulty import Difficulty
from arena.env.registry import bundled_env_dirs, env_name_of
from arena.store import CurriculumStateRow, Store, repo
from curriculum.state import EnvCurriculum
from ops.daemon import Daemon
from ops.phases.evaluate import EvaluatePhase


@pytest.mark.anyio
@pytest.mark.model
@pytest.mark.slow
async def test_evaluate_runs_conversational_tasks_with_the_helper_as_user(
    make_config, embedded_model_path, run_daemon, small_eval
) -> None:
    overrides = {"ARENA_ROUND__EVAL_TASKS_PER_ENV": "2", "ARENA_ROUND__MAX_TURNS": "3"}
    config = make_config(**small_eval(embedded_model_path, **overrides))
    talk = Difficulty(conversational=1)
    async with Store(config.database_url) as store:
        await store.migrate()
        async with store.transaction() as s:
            for folder in bundled_env_dirs():
                name = env_name_of(folder)
                state = EnvCurriculum(env=name, difficulty=talk, raised=["conversational"])
                await repo.upsert_curriculum(
                    s, CurriculumStateRow(env=name, data=state.model_dump(mode="json"))
                )
    daemon = Daemon(config, phases=[EvaluatePhase()], max_rounds=1, handle_signals=False)
    async with run_daemon(daemon):
        pass  # runs the one EVALUATE to the end (it used to fail: no user simulator)
    assert daemon.rounds_completed == 1
    async with Store(config.database_url) as store, store.transaction() as s:
        episodes = await repo.episodes_for_round(s, 1, purpose="eval")
        tasks = [await repo.get_task(s, e.task_id) for e in episodes]
    assert len(episodes) == 2
    assert all(t is not None and t.data["mode"] == "conversational" for t in tasks)
    said = [[m["content"] for m in e.transcript["messages"] if m["role"] == "user"] for e in episodes]
    assert all(lines[0].startswith("Hi, I need some help with my") for lines in said)
    assert any(len(lines) >= 2 for lines in said), "the simulated user never spoke"
    assert {e.transcript["finish"] for e in episodes} <= {"answered", "user_stop", "max_turns", "max_tokens"}
