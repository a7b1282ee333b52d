"""The repository layer: small typed async functions over one session (one transaction).

Callers open a transaction with `Store.transaction()` and pass the session in, so several writes
(a phase's outputs and its "done" mark) commit together or not at all.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import SQLModel, col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store.tables import (
    PHASES,
    CheckpointRow,
    CurriculumStateRow,
    DaemonStateRow,
    DiagnosisReportRow,
    EnvironmentRow,
    EpisodeRow,
    EventRow,
    PhaseRow,
    RoundRow,
    TaskRow,
    utcnow,
)


async def _upsert(
    session: AsyncSession, model: type[SQLModel], values: dict[str, Any], keys: Sequence[str]
) -> None:
    """INSERT ... ON CONFLICT (keys) DO UPDATE, on SQLite and PostgreSQL alike."""
    await _upsert_many(session, model, [values], keys)


async def _upsert_many(
    session: AsyncSession, model: type[SQLModel], rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> None:
    """`_upsert` of several rows with the same columns in one statement (an executemany)."""
    if not rows:
        return
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    stmt = _upsert_statement(model, dialect, tuple(keys), tuple(rows[0]))
    await session.exec(stmt, params=list(rows))  # type: ignore[call-overload]


@functools.cache
def _upsert_statement(
    model: type[SQLModel], dialect: str, keys: tuple[str, ...], columns: tuple[str, ...]
) -> Any:
    # Built once per table and column set: building the ON CONFLICT clause (its EXCLUDED alias of
    # every column) cost more CPU than the INSERT itself, once per stored episode.
    table = model.__table__  # type: ignore[attr-defined]
    stmt = (pg_insert if dialect == "postgresql" else sqlite_insert)(table)
    update = {k: stmt.excluded[k] for k in columns if k not in keys and k != "id"}
    if update:
        return stmt.on_conflict_do_update(index_elements=list(keys), set_=update)
    return stmt.on_conflict_do_nothing(index_elements=list(keys))


def _values(row: SQLModel, *, skip: Sequence[str] = ()) -> dict[str, Any]:
    return {k: v for k, v in row.model_dump().items() if k not in skip}


# --- rounds and phases ------------------------------------------------------------------------


async def next_round(session: AsyncSession) -> int:
    """The round to work on: the first one not completed, else one past the last (rounds start at 1)."""
    open_round = (
        await session.exec(select(func.min(RoundRow.round)).where(RoundRow.status != "completed"))
    ).one()
    if open_round is not None:
        return int(open_round)
    last = (await session.exec(select(func.max(RoundRow.round)))).one()
    return int(last or 0) + 1


async def ensure_round(session: AsyncSession, round_no: int, phases: Sequence[str] = PHASES) -> RoundRow:
    """The round's row, creating it and its pending phase rows when new."""
    row = await session.get(RoundRow, round_no)
    if row is None:
        row = RoundRow(round=round_no)
        session.add(row)
        for name in phases:
            session.add(PhaseRow(round=round_no, phase=name))
        await session.flush()
    return row


async def get_round(session: AsyncSession, round_no: int) -> RoundRow | None:
    """One round's row."""
    return await session.get(RoundRow, round_no)


async def list_rounds(session: AsyncSession, limit: int = 20) -> list[RoundRow]:
    """The most recent rounds, newest first."""
    rows = await session.exec(select(RoundRow).order_by(col(RoundRow.round).desc()).limit(limit))
    return list(rows.all())


async def last_completed_round(session: AsyncSession) -> RoundRow | None:
    """The newest completed round."""
    rows = await session.exec(
        select(RoundRow).where(RoundRow.status == "completed").order_by(col(RoundRow.round).desc()).limit(1)
    )
    return rows.first()


async def get_phases(session: AsyncSession, round_no: int) -> dict[str, PhaseRow]:
    """The phase rows of a round, by phase name."""
    rows = await session.exec(select(PhaseRow).where(PhaseRow.round == round_no))
    return {row.phase: row for row in rows.all()}


async def get_phase(session: AsyncSession, round_no: int, phase: str) -> PhaseRow | None:
    """One phase row."""
    return await session.get(PhaseRow, (round_no, phase))


async def start_phase(session: AsyncSession, round_no: int, phase: str) -> PhaseRow:
    """Mark a phase running (counting the attempt)."""
    row = await session.get(PhaseRow, (round_no, phase))
    if row is None:
        raise KeyError(f"round {round_no} has no phase {phase!r}")
    if row.status == "done":
        raise ValueError(f"phase {phase!r} of round {round_no} is already done")
    row.status = "running"
    row.attempts += 1
    row.started_at = utcnow()
    row.error = None
    session.add(row)
    return row


async def finish_phase(
    session: AsyncSession,
    round_no: int,
    phase: str,
    output: dict[str, Any],
    *,
    complete_round: bool = False,
    summary: dict[str, Any] | None = None,
) -> None:
    """Mark a phase done with its output; with `complete_round`, also close the round.

    Call it in the same transaction as the phase's own writes.
    """
    row = await session.get(PhaseRow, (round_no, phase))
    if row is None:
        raise KeyError(f"round {round_no} has no phase {phase!r}")
    if row.status == "done":
        raise ValueError(f"phase {phase!r} of round {round_no} is already done")
    row.status = "done"
    row.finished_at = utcnow()
    row.output = output
    row.error = None
    session.add(row)
    if complete_round:
        rnd = await session.get(RoundRow, round_no)
        if rnd is None:
            raise KeyError(f"no round {round_no}")
        rnd.status = "completed"
        rnd.finished_at = utcnow()
        rnd.summary = summary or {}
        session.add(rnd)


async def fail_phase(session: AsyncSession, round_no: int, phase: str, error: str) -> None:
    """Record a phase failure (it stays unfinished and is retried)."""
    row = await session.get(PhaseRow, (round_no, phase))
    if row is not None:
        row.status = "failed"
        row.error = error[:4000]
        session.add(row)


# --- environments, tasks, episodes ---------------------------------------------------------------


async def upsert_environment(session: AsyncSession, row: EnvironmentRow) -> None:
    """Register or update an environment."""
    await _upsert(session, EnvironmentRow, _values(row), ["name"])


async def list_environments(session: AsyncSession) -> list[EnvironmentRow]:
    """Every registered environment."""
    return list((await session.exec(select(EnvironmentRow).order_by(EnvironmentRow.name))).all())


async def upsert_task(session: AsyncSession, row: TaskRow) -> None:
    """Store or replace a task."""
    await _upsert(session, TaskRow, _values(row), ["id"])


async def get_task(session: AsyncSession, task_id: str) -> TaskRow | None:
    """One task."""
    return await session.get(TaskRow, task_id)


async def tasks_for_round(session: AsyncSession, round_no: int) -> list[TaskRow]:
    """Tasks created in a round."""
    return list((await session.exec(select(TaskRow).where(TaskRow.round == round_no))).all())


async def upsert_episode(session: AsyncSession, row: EpisodeRow) -> None:
    """Store an episode keyed by (round, task_id, sample_idx); rerunning the same key replaces it."""
    await upsert_episodes(session, [row])


async def upsert_episodes(session: AsyncSession, rows: Sequence[EpisodeRow]) -> None:
    """`upsert_episode` of several episodes in one statement (a group commit's batch)."""
    await upsert_episode_values(session, [{c: getattr(row, c) for c in EPISODE_COLUMNS} for row in rows])


# An episode's stored columns but its surrogate id: what `upsert_episode_values` takes per episode.
EPISODE_COLUMNS: tuple[str, ...] = tuple(
    c.name
    for c in EpisodeRow.__table__.columns  # type: ignore[attr-defined]
    if c.name != "id"
)
_EPISODE_COLUMN_SET = frozenset(EPISODE_COLUMNS)


async def upsert_episode_values(session: AsyncSession, values: Sequence[Mapping[str, Any]]) -> None:
    """`upsert_episodes` from plain column mappings (exactly `EPISODE_COLUMNS` each).

    A phase's commit path: building an `EpisodeRow` and dumping it again cost the daemon more CPU
    per episode than the INSERT (SQLModel's instrumentation and a deep copy of the transcript), and
    in cluster mode the daemon's CPU per episode bounds every worker's throughput.
    """
    latest: dict[tuple[Any, Any, Any], Mapping[str, Any]] = {}
    for v in values:
        if v.keys() != _EPISODE_COLUMN_SET:
            missing, unknown = sorted(_EPISODE_COLUMN_SET - v.keys()), sorted(v.keys() - _EPISODE_COLUMN_SET)
            raise ValueError(f"an episode's values lack columns {missing} and have unknown ones {unknown}")
        # One statement cannot update a row twice (PostgreSQL refuses it): the last of a key wins.
        latest[(v["round"], v["task_id"], v["sample_idx"])] = v
    await _upsert_many(session, EpisodeRow, list(latest.values()), ["round", "task_id", "sample_idx"])


async def episode_keys(
    session: AsyncSession, round_no: int, purpose: str | None = None
) -> set[tuple[str, int]]:
    """The (task_id, sample_idx) keys already stored for a round: work that must not be redone."""
    stmt = select(EpisodeRow.task_id, EpisodeRow.sample_idx).where(EpisodeRow.round == round_no)
    if purpose is not None:
        stmt = stmt.where(EpisodeRow.purpose == purpose)
    return {(t, int(i)) for t, i in (await session.exec(stmt)).all()}


async def episodes_for_round(
    session: AsyncSession, round_no: int, purpose: str | None = None
) -> list[EpisodeRow]:
    """A round's episodes."""
    stmt = select(EpisodeRow).where(EpisodeRow.round == round_no)
    if purpose is not None:
        stmt = stmt.where(EpisodeRow.purpose == purpose)
    return list((await session.exec(stmt.order_by(EpisodeRow.task_id, EpisodeRow.sample_idx))).all())


TRANSCRIPTS_PRUNED = "transcripts.pruned"


async def prune_transcripts(session: AsyncSession, through_round: int, *, actor: str = "daemon") -> int:
    """Empty the transcripts of episodes up to `through_round`; returns how many were emptied.

    Transcripts are most of the store's growth, and only the current round's are read (diagnosis);
    rewards, verdicts and pass rates stay for history. Each prune is an audit event whose
    `through_round` is the watermark of the next, so every episode is rewritten once, not every round.
    """
    last = await session.exec(
        select(EventRow)
        .where(EventRow.action == TRANSCRIPTS_PRUNED)
        .order_by(col(EventRow.id).desc())
        .limit(1)
    )
    previous = last.first()
    start = int(previous.detail.get("through_round", 0)) + 1 if previous is not None else 1
    if through_round < start:
        return 0
    result = await session.exec(
        sa.update(EpisodeRow)
        .where(col(EpisodeRow.round) >= start, col(EpisodeRow.round) <= through_round)
        .values(transcript={})
    )
    emptied = int(result.rowcount or 0)
    detail = {"from_round": start, "through_round": through_round, "episodes": emptied}
    await record_event(session, actor, TRANSCRIPTS_PRUNED, detail)
    return emptied


async def pass_rates(session: AsyncSession, round_no: int, purpose: str = "eval") -> dict[str, float]:
    """Pass rate per environment in a round."""
    passed = func.sum(sa.case((col(EpisodeRow.passed), 1), else_=0))
    stmt = (
        select(EpisodeRow.env, passed, func.count())
        .where(EpisodeRow.round == round_no, EpisodeRow.purpose == purpose)
        .group_by(EpisodeRow.env)
    )
    return {env: float(p or 0) / n for env, p, n in (await session.exec(stmt)).all() if n}


# --- daemon state and events ------------------------------------------------------------------------


async def get_daemon_state(session: AsyncSession) -> DaemonStateRow:
    """The daemon's persisted switches (created on first use)."""
    row = await session.get(DaemonStateRow, 1)
    if row is None:
        row = DaemonStateRow(id=1)
        session.add(row)
        await session.flush()
    return row


async def set_paused(session: AsyncSession, paused: bool, *, actor: str, reason: str = "") -> bool:
    """Set the paused flag and log the action; returns whether the flag changed."""
    row = await get_daemon_state(session)
    changed = row.paused != paused
    if changed:
        row.paused = paused
        row.paused_since = utcnow() if paused else None
        row.pause_reason = reason[:500] if paused else ""
        row.updated_at = utcnow()
        session.add(row)
    await record_event(
        session, actor, "pause" if paused else "resume", {"reason": reason, "changed": changed}
    )
    return changed


async def record_event(session: AsyncSession, actor: str, action: str, detail: dict[str, Any]) -> None:
    """Append to the audit log."""
    session.add(EventRow(actor=actor[:100], action=action[:50], detail=detail))


async def list_events(session: AsyncSession, limit: int = 50) -> list[EventRow]:
    """The most recent events, newest first."""
    rows = await session.exec(select(EventRow).order_by(col(EventRow.id).desc()).limit(limit))
    return list(rows.all())


# --- curriculum, diagnosis, checkpoints ---------------------------------------------------------------


async def upsert_curriculum(session: AsyncSession, row: CurriculumStateRow) -> None:
    """Store one environment's curriculum state."""
    row.updated_at = utcnow()
    await _upsert(session, CurriculumStateRow, _values(row), ["env"])


async def curriculum_states(session: AsyncSession) -> dict[str, CurriculumStateRow]:
    """Every environment's curriculum state."""
    return {r.env: r for r in (await session.exec(select(CurriculumStateRow))).all()}


async def save_diagnosis(session: AsyncSession, round_no: int, source: str, report: dict[str, Any]) -> None:
    """Store (or replace) a round's diagnosis report."""
    await _upsert(
        session,
        DiagnosisReportRow,
        {"round": round_no, "source": source, "report": report, "created_at": utcnow()},
        ["round"],
    )


async def get_diagnosis(session: AsyncSession, round_no: int) -> DiagnosisReportRow | None:
    """A round's diagnosis report."""
    return await session.get(DiagnosisReportRow, round_no)


async def add_checkpoint(session: AsyncSession, row: CheckpointRow) -> None:
    """Record a checkpoint (idempotent on its id)."""
    await _upsert(session, CheckpointRow, _values(row), ["id"])


async def latest_checkpoint(session: AsyncSession, *, published: bool | None = None) -> CheckpointRow | None:
    """The newest checkpoint (optionally only published ones)."""
    stmt = select(CheckpointRow)
    if published is not None:
        stmt = stmt.where(CheckpointRow.published == published)
    stmt = stmt.order_by(col(CheckpointRow.round).desc(), col(CheckpointRow.created_at).desc()).limit(1)
    return (await session.exec(stmt)).first()


def as_utc_iso(value: datetime | None) -> str | None:
    """ISO text of a stored timestamp (SQLite hands them back naive; they are UTC)."""
    if value is None:
        return None
    return value.isoformat() if value.tzinfo else value.isoformat() + "+00:00"
