"""The yardstick's store functions: its fixed tasks and each round's greedy runs (one session each).

Kept apart from `repo` so that module stays small; the conventions are the same (the caller opens
the transaction, writes are idempotent upserts).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store.repo import _upsert, _values
from arena.store.tables import YardstickRunRow, YardstickTaskRow


async def add_tasks(session: AsyncSession, rows: Sequence[YardstickTaskRow]) -> None:
    """Store drawn yardstick tasks; a task already stored is kept as it was (drawn once, never redrawn)."""
    for row in rows:
        if await session.get(YardstickTaskRow, row.id) is None:
            session.add(row)
    await session.flush()


async def tasks(session: AsyncSession, envs: Sequence[str] | None = None) -> list[YardstickTaskRow]:
    """The yardstick's tasks (of `envs` only when given), ordered by environment, level and id."""
    stmt = select(YardstickTaskRow)
    if envs is not None:
        stmt = stmt.where(col(YardstickTaskRow.env).in_(list(envs)))
    stmt = stmt.order_by(YardstickTaskRow.env, YardstickTaskRow.level, YardstickTaskRow.id)
    return list((await session.exec(stmt)).all())


async def add_run(session: AsyncSession, row: YardstickRunRow) -> None:
    """Store one run keyed by (round, stage, task); rerunning the same key replaces it."""
    await _upsert(session, YardstickRunRow, _values(row), ["round", "stage", "task_id"])


async def runs(session: AsyncSession, round_no: int, stage: str) -> list[YardstickRunRow]:
    """One round's runs of one stage (`live` or `candidate`)."""
    stmt = (
        select(YardstickRunRow)
        .where(YardstickRunRow.round == round_no, YardstickRunRow.stage == stage)
        .order_by(YardstickRunRow.task_id)
    )
    return list((await session.exec(stmt)).all())


async def latest_runs_of(session: AsyncSession, policy: str, *, before_round: int) -> list[YardstickRunRow]:
    """The runs of `policy` from the newest (round, stage) before `before_round` that measured it."""
    stmt = (
        select(YardstickRunRow.round, YardstickRunRow.stage)
        .where(YardstickRunRow.policy == policy, col(YardstickRunRow.round) < before_round)
        .order_by(col(YardstickRunRow.round).desc(), col(YardstickRunRow.stage).desc())
        .limit(1)
    )
    newest = (await session.exec(stmt)).first()
    return [] if newest is None else await runs(session, int(newest[0]), str(newest[1]))


async def rounds_measured(session: AsyncSession, stage: str = "live") -> list[int]:
    """The rounds with runs of `stage`, oldest first."""
    stmt = select(YardstickRunRow.round).where(YardstickRunRow.stage == stage).group_by(YardstickRunRow.round)
    return sorted(int(r) for r in (await session.exec(stmt)).all())


async def count_tasks(session: AsyncSession) -> int:
    """How many yardstick tasks are stored."""
    return int((await session.exec(select(func.count()).select_from(YardstickTaskRow))).one())
