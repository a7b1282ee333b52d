"""The store on SQLite and PostgreSQL: migrations from empty, idempotent upserts, phase transactions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from arena.store import (
    PHASES,
    CheckpointRow,
    CurriculumStateRow,
    EpisodeRow,
    JsonText,
    Store,
    TaskRow,
    check_integrity,
    repo,
)
from arena.store.tables import metadata, utcnow

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'arena.db'}"
    else:
        url = request.getfixturevalue("pg_database")
    s = Store(url)
    async with s.engine.begin() as conn:  # the session-wide PostgreSQL database is reused: start empty
        await conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
        await conn.run_sync(metadata.drop_all)
    await s.migrate()
    yield s
    await s.aclose()


async def test_migrations_from_empty_match_the_models(store: Store) -> None:
    assert await store.revision() == "0006"
    async with store.engine.connect() as conn:
        diff = await conn.run_sync(lambda c: compare_metadata(MigrationContext.configure(c), metadata))
    assert diff == []
    assert await store.migrate() == "0006"  # a second run is a no-op


@pytest.mark.postgres
async def test_postgresql_compresses_new_transcripts_with_lz4(fresh_pg_database: str) -> None:
    """Transcripts are most of the bytes every commit writes; lz4 costs the server less CPU than pglz."""
    async with Store(fresh_pg_database) as s:
        await s.migrate()
        async with s.transaction() as session:
            await repo.ensure_round(session, 1)
            await repo.upsert_task(
                session, TaskRow(id="t1", env="shop", origin="manual", round=1, data={"id": "t1"})
            )
            episode = _episode(1, "t1", 0, 1.0)
            episode.transcript = {"messages": [{"role": "tool", "content": "row " * 2000}]}  # TOASTed
            await repo.upsert_episode(session, episode)
        async with s.engine.connect() as conn:
            used = await conn.exec_driver_sql("SELECT pg_column_compression(transcript) FROM episodes")
            assert used.scalar_one() == "lz4"


def _episode(rnd: int, task: str, idx: int, reward: float) -> EpisodeRow:
    return EpisodeRow(
        round=rnd,
        task_id=task,
        sample_idx=idx,
        env="shop",
        reward=reward,
        passed=reward >= 1.0,
        transcript={"messages": [{"role": "user", "content": "hi"}]},
        verdict={"reward": reward},
    )


async def test_episode_upsert_is_idempotent(store: Store) -> None:
    async with store.transaction() as s:
        await repo.ensure_round(s, 1)
        await repo.upsert_task(s, TaskRow(id="t1", env="shop", origin="manual", round=1, data={"id": "t1"}))
        await repo.upsert_episode(s, _episode(1, "t1", 0, 0.0))
        await repo.upsert_episode(s, _episode(1, "t1", 1, 1.0))
    async with store.transaction() as s:
        await repo.upsert_episode(s, _episode(1, "t1", 0, 1.0))  # same key again: replaced, not added
    async with store.transaction() as s:
        eps = await repo.episodes_for_round(s, 1)
        assert [(e.task_id, e.sample_idx, e.reward) for e in eps] == [("t1", 0, 1.0), ("t1", 1, 1.0)]
        assert eps[0].transcript["messages"][0]["content"] == "hi"
        assert await repo.episode_keys(s, 1) == {("t1", 0), ("t1", 1)}
        assert await repo.pass_rates(s, 1) == {"shop": 1.0}
        report = await check_integrity(s)
    assert report.ok, report.problems
    assert report.counts["episodes"] == 2


async def test_episode_values_store_a_workers_json_text_as_the_document(store: Store) -> None:
    """A cluster worker sends transcripts as JSON text: stored as the document, not as a JSON string."""
    transcript = {"messages": [{"role": "user", "content": 'caf\u00e9 "quoted"'}], "n": [1, 2.5, None]}
    values = {
        "round": 1,
        "task_id": "t1",
        "sample_idx": 0,
        "env": "shop",
        "purpose": "eval",
        "reward": 1.0,
        "passed": True,
        "finish": "answered",
        "transcript": JsonText(json.dumps(transcript)),
        "verdict": {"reward": 1.0},
        "worker": "node/1",
        "created_at": utcnow(),
    }
    async with store.transaction() as s:
        await repo.ensure_round(s, 1)
        await repo.upsert_task(s, TaskRow(id="t1", env="shop", origin="manual", round=1, data={"id": "t1"}))
        await repo.upsert_episode_values(s, [values, {**values, "reward": 0.5}])  # the last of a key wins
    async with store.transaction() as s:
        [episode] = await repo.episodes_for_round(s, 1)
    assert episode.transcript == transcript
    assert (episode.reward, episode.worker) == (0.5, "node/1")


async def test_episode_values_missing_a_column_are_refused_by_name(store: Store) -> None:
    async with store.transaction() as s:
        with pytest.raises(
            ValueError, match=r"lack columns \['created_at'\] and have unknown ones \['oops'\]"
        ):
            await repo.upsert_episode_values(
                s,
                [
                    {c: 0 for c in repo.EPISODE_COLUMNS if c != "created_at"} | {"oops": 1},
                ],
            )


async def test_pruning_empties_old_transcripts_once_and_keeps_rewards(store: Store) -> None:
    async with store.transaction() as s:
        await repo.upsert_task(s, TaskRow(id="t1", env="shop", origin="manual", round=1, data={"id": "t1"}))
        for rnd in (1, 2, 3):
            await repo.ensure_round(s, rnd)
            await repo.upsert_episode(s, _episode(rnd, "t1", 0, 1.0))
            await repo.upsert_episode(s, _episode(rnd, "t1", 1, 0.0))
    async with store.transaction() as s:
        assert await repo.prune_transcripts(s, 2) == 4
    async with store.transaction() as s:
        # Rounds up to the watermark are done: the next prune touches only newer rounds.
        assert await repo.prune_transcripts(s, 2) == 0
        assert await repo.prune_transcripts(s, 1) == 0
        for rnd, kept in ((1, False), (2, False), (3, True)):
            eps = await repo.episodes_for_round(s, rnd)
            assert [bool(e.transcript) for e in eps] == [kept, kept]
            assert [(e.reward, e.verdict) for e in eps] == [(1.0, {"reward": 1.0}), (0.0, {"reward": 0.0})]
            assert await repo.pass_rates(s, rnd) == {"shop": 0.5}
        events = [e for e in await repo.list_events(s) if e.action == repo.TRANSCRIPTS_PRUNED]
        assert [e.detail for e in events] == [{"from_round": 1, "through_round": 2, "episodes": 4}]
    async with store.transaction() as s:
        assert await repo.prune_transcripts(s, 3) == 2
        assert not any(e.transcript for e in await repo.episodes_for_round(s, 3))
        report = await check_integrity(s)
    assert report.ok, report.problems


async def test_phase_outputs_and_done_mark_commit_together(store: Store) -> None:
    async with store.transaction() as s:
        assert await repo.next_round(s) == 1
        await repo.ensure_round(s, 1)
        await repo.start_phase(s, 1, "diagnose")
    with pytest.raises(RuntimeError):
        async with store.transaction() as s:
            await repo.save_diagnosis(s, 1, "statistical", {"weak": ["shop"]})
            await repo.finish_phase(s, 1, "diagnose", {"weak": 1})
            raise RuntimeError("crash before commit")
    async with store.transaction() as s:
        assert await repo.get_diagnosis(s, 1) is None
        assert (await repo.get_phase(s, 1, "diagnose")).status == "running"  # type: ignore[union-attr]
        await repo.save_diagnosis(s, 1, "statistical", {"weak": ["shop"]})
        await repo.finish_phase(s, 1, "diagnose", {"weak": 1})
    async with store.transaction() as s:
        assert (await repo.get_diagnosis(s, 1)).report == {"weak": ["shop"]}  # type: ignore[union-attr]
        phase = await repo.get_phase(s, 1, "diagnose")
        assert phase is not None and phase.status == "done" and phase.output == {"weak": 1}
        with pytest.raises(ValueError, match="already done"):
            await repo.finish_phase(s, 1, "diagnose", {})


async def test_round_completion_state_and_integrity(store: Store) -> None:
    async with store.transaction() as s:
        await repo.ensure_round(s, 1)
        for name in PHASES:
            await repo.start_phase(s, 1, name)
            await repo.finish_phase(s, 1, name, {"n": name}, complete_round=name == PHASES[-1])
        await repo.upsert_curriculum(s, CurriculumStateRow(env="shop", difficulty=0.4, pass_history=[0.5]))
        await repo.add_checkpoint(s, CheckpointRow(id="ck1", round=1, path="/ck/1", published=True))
        assert await repo.set_paused(s, True, actor="test", reason="maintenance")
        assert not await repo.set_paused(s, True, actor="test")
    async with store.transaction() as s:
        assert await repo.next_round(s) == 2
        assert (await repo.last_completed_round(s)).round == 1  # type: ignore[union-attr]
        assert (await repo.get_daemon_state(s)).paused
        assert [e.action for e in await repo.list_events(s)] == ["pause", "pause"]
        assert (await repo.curriculum_states(s))["shop"].pass_history == [0.5]
        assert (await repo.latest_checkpoint(s, published=True)).id == "ck1"  # type: ignore[union-attr]
        assert (await check_integrity(s)).ok
        # Break an invariant on purpose: the check must notice.
        await repo.upsert_episode(s, _episode(7, "ghost", 0, 0.0))
        report = await check_integrity(s)
    assert not report.ok
    assert any("no round" in p for p in report.problems)
    assert any("no task" in p for p in report.problems)
