"""Daemon control flow with trivial fast phases: resume after restart, pause at safe points."""

from __future__ import annotations

from typing import ClassVar

import anyio
import pytest
from structlog.testing import capture_logs

from arena.store import PHASES, Store, check_integrity, repo
from ops.daemon import Daemon
from ops.phases.base import PhaseOutput

pytestmark = pytest.mark.anyio


async def _phase_status(config, round_no: int = 1) -> dict[str, str]:
    async with Store(config.database_url) as store, store.transaction() as s:
        return {name: row.status for name, row in (await repo.get_phases(s, round_no)).items()}


async def test_restart_resumes_at_first_unfinished_phase(make_config, fakes, run_daemon, until) -> None:
    config = make_config()
    calls: list[str] = []
    phases = fakes.fake_phases(steps=200, delay=0.01, calls=calls)
    daemon = Daemon(config, phases=phases, handle_signals=False)
    async with run_daemon(daemon):
        await until(lambda: daemon.phase == "plan" and phases[2].done_steps > 2)
        await daemon.stop("test")
    assert calls == ["evaluate", "diagnose", "plan"]
    status = await _phase_status(config)
    assert status["evaluate"] == status["diagnose"] == "done"
    assert status["plan"] == "running" and status["publish"] == "pending"

    calls2: list[str] = []
    daemon2 = Daemon(
        config, phases=fakes.fake_phases(steps=2, calls=calls2), max_rounds=1, handle_signals=False
    )
    with capture_logs() as logs:
        async with run_daemon(daemon2):
            pass  # runs round 1 to the end, then exits (max_rounds=1)
    assert calls2 == ["plan", "synthesize", "train", "publish"]  # committed phases are not redone
    # Each phase gives its peak back before the next one starts.
    released = [e["reason"] for e in logs if e["event"] == "memory.released"]
    assert released == [f"{name} phase" for name in calls2]
    async with Store(config.database_url) as store, store.transaction() as s:
        rnd = await repo.get_round(s, 1)
        assert rnd is not None and rnd.status == "completed"
        assert set(rnd.summary["phases"]) == set(PHASES)
        assert (await repo.get_diagnosis(s, 1)) is not None
        assert len(await repo.episodes_for_round(s, 1)) == 8
        report = await check_integrity(s)
    assert report.ok, report.problems


class Evaluated(PhaseOutput):
    """What the reader below takes from the fake EVALUATE's stored output."""

    phase: ClassVar[str] = "evaluate"

    episodes: int


async def _round_with_evaluate_done(config, output: dict) -> None:
    """Round 1 in the store with EVALUATE done (its `output` stored), as a restarted daemon finds it."""
    async with Store(config.database_url) as store:
        await store.migrate()
        async with store.transaction() as s:
            await repo.ensure_round(s, 1)
            await repo.start_phase(s, 1, "evaluate")
            await repo.finish_phase(s, 1, "evaluate", output)


def _reading_phases(fakes, seen: list) -> list:
    """The fake phases, DIAGNOSE reading EVALUATE's output through its model first."""

    class Reader(fakes.StepPhase):
        async def run(self, ctx):
            seen.append(ctx.output(Evaluated))
            return await super().run(ctx)

    phases = fakes.fake_phases(steps=1)
    phases[1] = Reader("diagnose", steps=1, calls=phases[0].calls)
    return phases


async def test_a_resumed_round_hands_the_stored_outputs_to_later_phases_typed(
    make_config, fakes, run_daemon
) -> None:
    config = make_config()
    await _round_with_evaluate_done(config, {"episodes": 8, "succeeded": 8})
    seen: list = []
    phases = _reading_phases(fakes, seen)
    async with run_daemon(Daemon(config, phases=phases, max_rounds=1, handle_signals=False)):
        pass
    assert phases[0].calls == ["diagnose", "plan", "synthesize", "train", "publish"]  # EVALUATE stays done
    assert seen == [Evaluated(episodes=8, succeeded=8)]


async def test_a_malformed_stored_output_fails_the_reading_phase_and_says_why(
    make_config, fakes, run_daemon, until
) -> None:
    config = make_config(ARENA_DAEMON__MAX_PHASE_FAILURES="1")
    await _round_with_evaluate_done(config, {"episodes": "many"})
    seen: list = []
    daemon = Daemon(config, phases=_reading_phases(fakes, seen), handle_signals=False)
    async with run_daemon(daemon) as client:
        await until(lambda: daemon.paused)
        await client.post("/stop")
    assert seen == []  # no default stood in for the bad output
    async with Store(config.database_url) as store, store.transaction() as s:
        rows = await repo.get_phases(s, 1)
    assert rows["diagnose"].status == "failed" and rows["evaluate"].output == {"episodes": "many"}
    assert rows["diagnose"].error is not None and rows["diagnose"].error.startswith(
        "PhaseOutputError: round 1: the stored output of phase 'evaluate' does not match Evaluated: "
        "episodes: Input should be a valid integer"
    )


async def test_pause_stops_new_work_and_survives_restart(make_config, fakes, run_daemon, until) -> None:
    config = make_config(ARENA_ADMIN_TOKEN="s3cret")
    auth = {"Authorization": "Bearer s3cret"}
    phases = fakes.fake_phases(steps=400, delay=0.01)
    daemon = Daemon(config, phases=phases, handle_signals=False)
    async with run_daemon(daemon) as client:
        await until(lambda: daemon.phase == "diagnose" and phases[1].done_steps > 2)
        resp = await client.post("/pause", headers=auth, json={"reason": "maintenance"})
        assert resp.status_code == 200 and resp.json()["paused"] is True
        await anyio.sleep(0.1)  # the step in flight finishes; no new one starts
        frozen = phases[1].done_steps
        await anyio.sleep(0.3)
        assert phases[1].done_steps == frozen
        status = (await client.get("/status")).json()
        assert status["paused"] is True and status["pause_reason"] == "maintenance"
        assert status["phase"] == "diagnose" and status["round"] == 1
        assert (await client.post("/stop", headers=auth)).status_code == 200

    # A new process: still paused, does nothing until resumed.
    phases2 = fakes.fake_phases(steps=2, delay=0.01)
    daemon2 = Daemon(config, phases=phases2, max_rounds=1, handle_signals=False)
    async with run_daemon(daemon2) as client:
        await until(lambda: daemon2.ready)
        await anyio.sleep(0.3)
        assert phases2[1].done_steps == 0 and daemon2.paused
        assert (await client.get("/status")).json()["paused"] is True
        resp = await client.post("/resume", headers=auth)
        assert resp.status_code == 200 and resp.json()["changed"] is True
    assert phases2[-1].done_steps == 2
    async with Store(config.database_url) as store, store.transaction() as s:
        actions = [e.action for e in reversed(await repo.list_events(s))]
        assert actions == ["pause", "stop", "resume"]
        assert not (await repo.get_daemon_state(s)).paused
        assert (await repo.get_round(s, 1)).status == "completed"  # type: ignore[union-attr]


async def test_failing_phase_is_retried_then_pauses(make_config, fakes, run_daemon, until) -> None:
    config = make_config(ARENA_DAEMON__MAX_PHASE_FAILURES="2")

    class Boom(fakes.StepPhase):
        async def run(self, ctx):
            self.calls.append(self.name)
            raise RuntimeError("backend exploded")

    phases = fakes.fake_phases()
    phases[1] = Boom("diagnose")
    daemon = Daemon(config, phases=phases, handle_signals=False)
    async with run_daemon(daemon) as client:
        await until(lambda: daemon.paused)
        assert phases[1].calls == ["diagnose", "diagnose"]
        status = (await client.get("/status")).json()
        assert "backend exploded" in status["pause_reason"]
        metrics = (await client.get("/metrics")).text
        assert 'arena_phase_failures_total{phase="diagnose"} 2.0' in metrics
        await client.post("/stop")
    assert (await _phase_status(config))["diagnose"] == "failed"


async def test_pause_then_stop_with_concurrent_episodes_waiting(
    make_config, fakes, run_daemon, until
) -> None:
    config = make_config()
    phases = fakes.fake_phases(tasks=50, delay=0.05)
    daemon = Daemon(config, phases=phases, handle_signals=False)
    with anyio.fail_after(30):
        async with run_daemon(daemon) as client:
            await until(lambda: daemon.progress_state["done"] >= 2)
            await client.post("/pause")
            await anyio.sleep(0.2)  # episodes in flight finish; both workers then wait at safe points
            frozen = daemon.progress_state["done"]
            await anyio.sleep(0.3)
            assert daemon.progress_state["done"] == frozen < 100
            await client.post("/stop")  # must wake every waiting worker, not just the last one
    assert (await _phase_status(config))["evaluate"] == "running"


async def test_rounds_keep_only_the_newest_transcripts(make_config, fakes, run_daemon) -> None:
    config = make_config(ARENA_STORE__KEEP_TRANSCRIPT_ROUNDS="2")
    daemon = Daemon(config, phases=fakes.fake_phases(steps=1), max_rounds=3, handle_signals=False)
    with capture_logs() as logs:
        async with run_daemon(daemon):
            pass
    pruned = [e for e in logs if e["event"] == "store.pruned"]
    assert [(e["newest_round"], e["transcripts"]) for e in pruned] == [(3, 8)]
    async with Store(config.database_url) as store, store.transaction() as s:
        episodes = {r: await repo.episodes_for_round(s, r) for r in (1, 2, 3)}
    assert {r: [bool(e.transcript) for e in eps] for r, eps in episodes.items()} == {
        1: [False] * 8,
        2: [True] * 8,
        3: [True] * 8,
    }
    assert len({e.reward for e in episodes[1]}) > 1  # round 1's rewards stay, episode by episode


async def test_rounds_keep_only_the_newest_episodes_and_events(make_config, fakes, run_daemon) -> None:
    config = make_config(
        ARENA_STORE__KEEP_EPISODE_ROUNDS="2",
        ARENA_STORE__KEEP_EVENT_ROUNDS="1",
        ARENA_STORE__KEEP_TASK_ROUNDS="1",
    )
    daemon = Daemon(config, phases=fakes.fake_phases(steps=1), max_rounds=4, handle_signals=False)
    async with run_daemon(daemon):
        pass
    async with Store(config.database_url) as store, store.transaction() as s:
        kept = {r: len(await repo.episodes_for_round(s, r)) for r in (1, 2, 3, 4)}
        events = await repo.list_events(s)
        report = await check_integrity(s)
    assert kept == {1: 0, 2: 0, 3: 8, 4: 8}
    # The events of rounds before the newest are gone; each prune since is an event of round 4.
    assert {e.action for e in events} <= {"store.pruned", repo.TRANSCRIPTS_PRUNED}
    assert report.ok, report.problems  # the fake tasks (the same ids every round) stay referenced
