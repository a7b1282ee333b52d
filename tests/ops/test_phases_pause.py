"""Pause during the real EVALUATE (embedded model): no new episode after the pause, across a restart.

The daemon runs only the real EVALUATE phase (three one-turn episodes, one at a time). It is
paused while the first episode is in flight and then stopped: stopping drains what is in flight,
so the episodes stored afterwards are exactly those that started — the in-flight one at most. A
new daemon on the same store starts paused and runs nothing; after resume the phase finishes
with every episode exactly once.
"""

from __future__ import annotations

import anyio
import pytest

from arena.store import Store, repo
from ops.daemon import Daemon
from ops.phases.evaluate import EvaluatePhase


async def stored(config) -> int:
    store = Store(config.database_url)
    try:
        async with store.transaction() as s:
            return len(await repo.episodes_for_round(s, 1, purpose="eval"))
    finally:
        await store.aclose()


@pytest.mark.anyio
@pytest.mark.model
@pytest.mark.slow
async def test_pause_during_real_evaluate_holds_across_restart(
    make_config, embedded_model_path, run_daemon, until, small_eval
) -> None:
    config = make_config(**small_eval(embedded_model_path))
    daemon = Daemon(config, phases=[EvaluatePhase()], max_rounds=1, handle_signals=False)
    async with run_daemon(daemon) as client:
        # Pause once the episodes are under way (the first one is in flight).
        await until(lambda: daemon.phase == "evaluate" and daemon.progress_state["total"] == 3, 300)
        at_pause = await stored(config)
        assert (await client.post("/pause", json={"reason": "maintenance"})).json()["paused"] is True
        await anyio.sleep(5)
        assert (await client.get("/status")).json()["paused"] is True
        # Stop while paused: the daemon drains (the in-flight episode finishes and is stored).
        await client.post("/stop")
    # Every episode that started is stored by now: only the one in flight at the pause ran.
    drained = await stored(config)
    assert drained <= at_pause + 1 and drained < 3
    assert daemon.rounds_completed == 0

    # A restarted daemon stays paused and runs nothing until resumed.
    daemon2 = Daemon(config, phases=[EvaluatePhase()], max_rounds=1, handle_signals=False)
    async with run_daemon(daemon2) as client:
        await until(lambda: daemon2.ready, 60)
        await anyio.sleep(5)
        assert await stored(config) == drained
        assert (await client.get("/status")).json()["pause_reason"] == "maintenance"
        await client.post("/resume")
        await until(lambda: daemon2.rounds_completed == 1, 400)
    assert await stored(config) == 3
