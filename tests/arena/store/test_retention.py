"""Retention on SQLite and PostgreSQL: each `store.keep_*_rounds` prunes its table, and nothing a
resumed round, the yardstick, the curriculum or `arena report` reads is ever removed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import select

from arena.store import (
    CheckpointRow,
    DiagnosisReportRow,
    EpisodeRow,
    EventRow,
    PhaseRow,
    PublicRunRow,
    RoundRow,
    Store,
    TaskRow,
    YardstickRunRow,
    YardstickTaskRow,
    check_integrity,
    public_runs,
    repo,
    repo_yardstick,
)
from arena.store.retention import Retention, newest_prunable_round, prune, reclaim
from ops.config_store import StoreConfig

pytestmark = pytest.mark.anyio
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    # A database of its own on PostgreSQL: retention counts every row of a table.
    sqlite = f"sqlite+aiosqlite:///{tmp_path / 'arena.db'}"
    s = Store(sqlite if request.param == "sqlite" else request.getfixturevalue("fresh_pg_database"))
    await s.migrate()
    yield s
    await s.aclose()


async def _rounds(store: Store, completed: int, running: tuple[int, ...] = ()) -> None:
    """Rounds 1..completed done and `running` unfinished: a task, 2 episodes, a yardstick run and
    public run, an event per round; task `hand` (re-stored each round) and `r2` (replayed in the
    last round) are shared across rounds."""
    async with store.transaction() as s:
        await repo_yardstick.add_tasks(s, [YardstickTaskRow(id="y/1", env="y", level="easy", data={})])
        for rnd in [*range(1, completed + 1), *running]:
            row = await repo.ensure_round(s, rnd, ())
            row.started_at = T0 + timedelta(hours=rnd)
            row.status = "running" if rnd in running else "completed"
            s.add(row)
            await repo.upsert_task(s, TaskRow(id=f"r{rnd}", env="e", origin="graph", round=rnd, data={}))
            await repo.upsert_task(s, TaskRow(id="hand", env="e", origin="manual", round=rnd, data={}))
            task = "r2" if rnd == completed else f"r{rnd}"
            for idx, task_id in enumerate((task, "hand")):
                ep = EpisodeRow(round=rnd, task_id=task_id, sample_idx=idx, env="e", transcript={"m": 1})
                await repo.upsert_episode(s, ep)
            await repo_yardstick.add_run(
                s, YardstickRunRow(round=rnd, stage="live", task_id="y/1", env="y", level="easy")
            )
            await public_runs.add_run(
                s, PublicRunRow(round=rnd, stage="live", benchmark="bfcl", entry_id="b1", category="base")
            )
            s.add(
                EventRow(at=T0 + timedelta(hours=rnd, minutes=1), actor="test", action=f"a{rnd}", detail={})
            )


async def test_each_setting_prunes_its_table_and_keeps_what_is_read(store: Store) -> None:
    await _rounds(store, completed=6, running=(7,))
    retention = Retention(
        transcript_rounds=1, episode_rounds=2, task_rounds=3, event_rounds=2, yardstick_rounds=2
    )
    async with store.transaction() as s:
        assert await newest_prunable_round(s) == 6  # round 7 is unfinished: never counted
        pruned = await prune(s, retention)
    assert pruned.model_dump() == {
        "newest_round": 6,
        "transcripts": 10,  # rounds 1-5
        "episodes": 8,  # rounds 1-4
        "tasks": 2,  # r1, r3: r2 is still replayed by round 6, r4 is recent, `hand` is round 7's
        "events": 4,  # a1-a4: from before round 5 started
        "yardstick_runs": 3,  # rounds 2-4: round 1 (the first measured) stays
        "public_runs": 3,
        "records": 0,
    }
    async with store.transaction() as s:
        episodes = (await s.exec(select(EpisodeRow))).all()
        assert sorted({e.round for e in episodes}) == [5, 6, 7]
        assert [bool(e.transcript) for e in sorted(episodes, key=lambda e: e.round)] == [False] * 2 + [
            True
        ] * 4
        tasks = {t.id for t in (await s.exec(select(TaskRow))).all()}
        assert tasks == {"hand", "r2", "r4", "r5", "r6", "r7"}
        assert await repo_yardstick.rounds_measured(s) == [1, 5, 6, 7]
        assert [r.round for r in await public_runs.latest_runs_of(s, "base", "bfcl", "", before_round=9)] == [
            7
        ]
        assert {r.round for r in (await s.exec(select(PublicRunRow))).all()} == {1, 5, 6, 7}
        assert await repo_yardstick.count_tasks(s) == 1  # the yardstick's drawn tasks stay
        actions = {e.action for e in await repo.list_events(s, 100)}
        # Events from before round 5 started are gone; the transcript watermark is not.
        assert actions == {"a5", "a6", "a7", repo.TRANSCRIPTS_PRUNED, "store.pruned"}
        report = await check_integrity(s, phases=())  # rounds without phase rows here
    assert report.ok, report.problems

    async with store.transaction() as s:  # a second prune at the same round removes nothing
        again = await prune(s, retention)
        assert again.total == 0
        # The watermark survived: the transcripts of rounds 1-5 are not rewritten again.
        assert await repo.prune_transcripts(s, 5) == 0


async def test_round_records_go_with_their_events_but_never_the_live_checkpoint(store: Store) -> None:
    """Rounds 1-6 done, 7 running, each with phases, a diagnosis and a checkpoint; round 2's is the
    live policy (published; 3-6 were held back). Keeping 2 rounds of records (5 and 6) deletes those
    of rounds 1-4 but round 2's checkpoint, and events from before round 5 with them; the records of
    a round whose episodes are still stored stay."""
    await _rounds(store, completed=6, running=(7,))
    async with store.transaction() as s:
        for rnd in range(1, 8):
            for phase in ("evaluate", "train"):
                s.add(PhaseRow(round=rnd, phase=phase, status="done" if rnd < 7 else "pending"))
            s.add(DiagnosisReportRow(round=rnd, source="statistical", report={"weak": []}))
            s.add(CheckpointRow(id=f"c{rnd}", round=rnd, path=f"/c/{rnd}", published=rnd <= 2))
    retention = Retention(record_rounds=2, event_rounds=5)
    async with store.transaction() as s:
        assert (
            await prune(s, retention.model_copy(update={"episode_rounds": 4}))
        ).records == 5 + 4  # c2 stays
        assert [r.round for r in (await s.exec(select(RoundRow))).all()] == [3, 4, 5, 6, 7]
        pruned = await prune(s, retention.model_copy(update={"episode_rounds": 2}))
        assert pruned.records == 2 * 4 + 2  # rounds 3-4: the round, 2 phases, a diagnosis, a checkpoint
        assert [r.round for r in (await s.exec(select(RoundRow))).all()] == [5, 6, 7]
        assert {p.round for p in (await s.exec(select(PhaseRow))).all()} == {5, 6, 7}
        assert {d.round for d in (await s.exec(select(DiagnosisReportRow))).all()} == {5, 6, 7}
        assert {c.id for c in (await s.exec(select(CheckpointRow))).all()} == {"c2", "c5", "c6", "c7"}
        assert (await repo.latest_checkpoint(s, published=True)).id == "c2"  # type: ignore[union-attr]
        assert {e.action for e in await repo.list_events(s, 100)} >= {"a5", "a6", "a7"}
        assert not {f"a{n}" for n in range(1, 5)} & {e.action for e in await repo.list_events(s, 100)}
        assert await repo_yardstick.rounds_measured(s) == [1, 2, 3, 4, 5, 6, 7]  # runs: their own setting
        report = await check_integrity(s, phases=("evaluate", "train"))
    assert report.ok, report.problems
    async with store.transaction() as s:  # a second prune at the same round removes nothing
        assert (await prune(s, retention)).total == 0


async def test_the_pruned_tables_are_vacuumed_on_postgresql(store: Store) -> None:
    """Deleted rows' space is reusable only after a vacuum there, and autovacuum may be off."""
    await _rounds(store, completed=4)
    async with store.transaction() as s:
        pruned = await prune(s, Retention(episode_rounds=1, record_rounds=1))
    assert pruned.tables == ["checkpoints", "diagnosis_reports", "episodes", "phases", "rounds"]
    await reclaim(store, pruned.tables)  # SQLite reuses free pages itself: nothing to do there
    if store.dialect == "postgresql":
        async with store.engine.connect() as conn:
            await conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            counts = await conn.exec_driver_sql(
                "SELECT vacuum_count, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'episodes'"
            )
            vacuums, dead = counts.one()
        assert vacuums >= 1 and dead == 0
    with pytest.raises(ValueError, match="not table names"):
        await reclaim(store, ["episodes; DROP TABLE rounds"])


async def test_nothing_from_an_unfinished_round_on_is_pruned(store: Store) -> None:
    """A round left unfinished by a crash (3) blocks pruning from it on, even with rounds after it."""
    await _rounds(store, completed=2, running=(3,))
    async with store.transaction() as s:
        row = await repo.ensure_round(s, 4)
        row.status = "completed"
        s.add(row)
    retention = Retention(episode_rounds=1, task_rounds=1, event_rounds=1, yardstick_rounds=1)
    async with store.transaction() as s:
        assert await newest_prunable_round(s) == 2
        pruned = await prune(s, retention)
        assert sorted({e.round for e in (await s.exec(select(EpisodeRow))).all()}) == [2, 3]
    assert pruned.episodes == 2


async def test_none_keeps_everything(store: Store) -> None:
    await _rounds(store, completed=4)
    async with store.transaction() as s:
        pruned = await prune(s, Retention())
        assert pruned.total == 0 and len((await s.exec(select(EpisodeRow))).all()) == 8


def test_every_store_keep_setting_reaches_the_retention() -> None:
    conf = StoreConfig(
        keep_transcript_rounds=1,
        keep_episode_rounds=2,
        keep_task_rounds=3,
        keep_event_rounds=4,
        keep_yardstick_rounds=5,
        keep_record_rounds=6,
    )
    assert Retention.of_settings(conf).model_dump() == {
        "transcript_rounds": 1,
        "episode_rounds": 2,
        "task_rounds": 3,
        "event_rounds": 4,
        "yardstick_rounds": 5,
        "record_rounds": 6,
    }
    keys = {k for k in StoreConfig.model_fields if k.startswith("keep_")}
    assert keys == {f"keep_{k}" for k in Retention.model_fields}
    with pytest.raises(ValueError):
        StoreConfig(keep_episode_rounds=0)
