"""Retention: how many rounds of tasks, episodes, events and yardstick runs the store keeps.

The daemon calls `prune` between rounds (after a round completed, before the next starts), so a
resumed round never loses anything: nothing of a round that is not completed, nor of any round
after it, is ever removed. What the rest of Arena still reads is always kept:
- the tasks of the newest round (the next PLAN reads last round's training tasks) and every task
  an episode still stored refers to (the integrity check's "episodes belong to no task");
- the yardstick's drawn tasks (`yardstick_tasks`, never pruned), the yardstick runs of the first
  measured round (`arena report`'s "since round 1") and of the newest `keep_yardstick_rounds`
  (which hold the live policy's runs a later round reuses); the same for the public yardstick;
- the records of the newest `keep_record_rounds` rounds: the round, its phases (outputs and
  times: `arena report`'s records), its diagnosis and the checkpoint lineage of its checkpoints
  (never the live policy's), and of every round an episode still stored belongs to; PLAN reads the previous round's TRAIN and `arena status` the last
  round's phases, so at least one completed round always stays. The curriculum's state is one row;
- events no older than the oldest round record still kept (the pruning counts from it);
- the newest `transcripts.pruned` event, the watermark of the transcript pruning.

Deleted rows leave free pages behind: SQLite reuses them for the next rounds' rows (the file
stops growing once retention applies; `VACUUM` shrinks it). On PostgreSQL their space is reusable
only once a vacuum has visited the table, and autovacuum may be off or far behind (a soak on a
server with it off grew 8.7 KB a round with retention applied): `reclaim` vacuums the tables a
prune touched, a plain `VACUUM (ANALYZE)` that takes no lock writers wait on (see
`docs/operations.md`).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store.public_runs import PublicRunRow
from arena.store.repo import TRANSCRIPTS_PRUNED, prune_transcripts, record_event
from arena.store.tables import (
    CheckpointRow,
    DiagnosisReportRow,
    EpisodeRow,
    EventRow,
    PhaseRow,
    RoundRow,
    TaskRow,
    YardstickRunRow,
)

PRUNED = "store.pruned"


class Retention(BaseModel):
    """Rounds kept of each growing table; None keeps everything (the `store.keep_*` settings)."""

    transcript_rounds: int | None = Field(None, ge=1)
    episode_rounds: int | None = Field(None, ge=1)
    task_rounds: int | None = Field(None, ge=1)
    event_rounds: int | None = Field(None, ge=1)
    yardstick_rounds: int | None = Field(None, ge=1)
    record_rounds: int | None = Field(None, ge=1)

    @classmethod
    def of_settings(cls, settings: Any) -> Retention:
        """From an object with `keep_<table>_rounds` attributes (ops' `StoreConfig`)."""
        return cls.model_validate({k: getattr(settings, f"keep_{k}", None) for k in cls.model_fields})


class Pruned(BaseModel):
    """Rows one `prune` removed, by table, and the newest completed round it counted from."""

    newest_round: int = 0
    transcripts: int = 0
    episodes: int = 0
    tasks: int = 0
    events: int = 0
    yardstick_runs: int = 0
    public_runs: int = 0
    records: int = 0  # rows of rounds, phases, diagnoses and checkpoint lineage

    @property
    def tables(self) -> list[str]:
        """The tables this prune deleted or emptied rows of."""
        touched = [
            (EpisodeRow, self.transcripts or self.episodes),
            (TaskRow, self.tasks),
            (EventRow, self.events),
            (YardstickRunRow, self.yardstick_runs),
            (PublicRunRow, self.public_runs),
            *((table, self.records) for table in (RoundRow, PhaseRow, DiagnosisReportRow, CheckpointRow)),
        ]
        return sorted(str(table.__tablename__) for table, rows in touched if rows)

    @property
    def total(self) -> int:
        """Rows removed in all."""
        return (
            self.transcripts
            + self.episodes
            + self.tasks
            + self.events
            + self.yardstick_runs
            + self.public_runs
            + self.records
        )


async def newest_prunable_round(session: AsyncSession) -> int:
    """The newest completed round that no unfinished round precedes (0 when none)."""
    open_rounds = select(func.min(RoundRow.round)).where(RoundRow.status != "completed")
    oldest_open = (await session.exec(open_rounds)).one()
    stmt = select(func.max(RoundRow.round)).where(RoundRow.status == "completed")
    if oldest_open is not None:
        stmt = stmt.where(col(RoundRow.round) < oldest_open)
    return int((await session.exec(stmt)).one() or 0)


async def prune(session: AsyncSession, retention: Retention, *, actor: str = "daemon") -> Pruned:
    """Remove what `retention` no longer keeps, counting from the newest prunable round.

    Idempotent: a second call with the same rounds removes nothing. Records a `store.pruned`
    event when it removed anything.
    """
    newest = await newest_prunable_round(session)
    out = Pruned(newest_round=newest)
    if newest == 0:
        return out
    if retention.transcript_rounds is not None and newest > retention.transcript_rounds:
        out.transcripts = await prune_transcripts(session, newest - retention.transcript_rounds, actor=actor)
    if retention.episode_rounds is not None:
        through = newest - retention.episode_rounds
        result = await session.exec(sa.delete(EpisodeRow).where(col(EpisodeRow.round) <= through))
        out.episodes = int(result.rowcount or 0)
    if retention.task_rounds is not None:
        through = newest - retention.task_rounds
        referenced = select(EpisodeRow.task_id).distinct()
        result = await session.exec(
            sa.delete(TaskRow).where(
                col(TaskRow.round).is_not(None),
                col(TaskRow.round) <= through,
                col(TaskRow.id).not_in(referenced),
            )
        )
        out.tasks = int(result.rowcount or 0)
    if retention.yardstick_rounds is not None:
        through = newest - retention.yardstick_rounds
        out.yardstick_runs = await _prune_runs(session, YardstickRunRow, through)
        out.public_runs = await _prune_runs(session, PublicRunRow, through)
    if retention.record_rounds is not None:  # first: the events' pruning counts from what is left
        out.records = await _prune_records(session, newest - retention.record_rounds)
    if retention.event_rounds is not None:
        out.events = await _prune_events(session, newest - retention.event_rounds + 1)
    if out.total - out.transcripts:  # the transcripts' prune is an event of its own
        await record_event(session, actor, PRUNED, out.model_dump())
    return out


async def _prune_runs(
    session: AsyncSession, table: type[YardstickRunRow | PublicRunRow], through: int
) -> int:
    """Delete a yardstick table's runs of rounds up to `through`, but never its first live round."""
    first = (await session.exec(select(func.min(table.round)).where(table.stage == "live"))).one()
    stmt = sa.delete(table).where(col(table.round) <= through)
    if first is not None:
        stmt = stmt.where(col(table.round) != first)
    result = await session.exec(stmt)
    return int(result.rowcount or 0)


async def _prune_events(session: AsyncSession, first_kept_round: int) -> int:
    """Delete the events older than the start of `first_kept_round`, but the newest watermark."""
    # The first kept round's start, or the oldest round record left when records go sooner.
    oldest_kept = select(RoundRow.started_at).where(RoundRow.round >= first_kept_round)
    start = (await session.exec(oldest_kept.order_by(col(RoundRow.round)).limit(1))).first()
    if start is None:
        return 0
    watermark = (
        await session.exec(select(func.max(EventRow.id)).where(EventRow.action == TRANSCRIPTS_PRUNED))
    ).one()
    stmt = sa.delete(EventRow).where(col(EventRow.at) < start)
    if watermark is not None:
        stmt = stmt.where(col(EventRow.id) != watermark)
    result = await session.exec(stmt)
    return int(result.rowcount or 0)


async def _prune_records(session: AsyncSession, through: int) -> int:
    """Delete the records of rounds up to `through`: round, phases, diagnosis and the lineage of
    their checkpoints, but never the live (newest published) checkpoint's row, nor the round of an
    episode still stored (an episode belongs to a round: episodes are kept longer than records)."""
    oldest_episode = (await session.exec(select(func.min(EpisodeRow.round)))).one()
    if oldest_episode is not None:
        through = min(through, oldest_episode - 1)
    live_stmt = (
        select(CheckpointRow.id)
        .where(col(CheckpointRow.published).is_(True))
        .order_by(col(CheckpointRow.round).desc(), col(CheckpointRow.created_at).desc())
        .limit(1)
    )
    live = (await session.exec(live_stmt)).first()
    checkpoints = sa.delete(CheckpointRow).where(col(CheckpointRow.round) <= through)
    if live is not None:
        checkpoints = checkpoints.where(col(CheckpointRow.id) != live)
    removed = 0
    for stmt in (
        checkpoints,
        sa.delete(DiagnosisReportRow).where(col(DiagnosisReportRow.round) <= through),
        sa.delete(PhaseRow).where(col(PhaseRow.round) <= through),
        sa.delete(RoundRow).where(col(RoundRow.round) <= through),
    ):
        result = await session.exec(stmt)
        removed += int(result.rowcount or 0)
    return removed


async def reclaim(store: Any, tables: list[str]) -> None:
    """Make the pruned rows' space reusable now: `VACUUM (ANALYZE)` those tables on PostgreSQL
    (outside a transaction, as VACUUM must be); nothing on SQLite, which reuses free pages itself."""
    if not all(name.isidentifier() for name in tables):  # names come from `Pruned.tables` alone
        raise ValueError(f"not table names: {tables}")
    if store.dialect != "postgresql" or not tables:
        return
    async with store.engine.connect() as conn:
        autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.exec_driver_sql(f"VACUUM (ANALYZE) {', '.join(tables)}")
