"""The public yardstick's runs: one row per round, stage, benchmark and entry.

`stage` is `live` (the policy EVALUATE measured) or `candidate` (the policy PUBLISH gated), as for
the yardstick; `entry_id` is the benchmark's own id (BFCL's `multi_turn_base_12`); `version` is the
imported distribution's. The conventions are `repo`'s: the caller opens the transaction, a rerun
of the same key replaces the row.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store.repo import _upsert, _values
from arena.store.tables import _ts, utcnow


class PublicRunRow(SQLModel, table=True):
    """One benchmark entry played by one policy in one round, scored by the benchmark's rules."""

    __tablename__ = "public_runs"
    round: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    stage: str = Field(primary_key=True, max_length=20)
    benchmark: str = Field(primary_key=True, max_length=40)
    entry_id: str = Field(primary_key=True, max_length=200)
    category: str = Field(max_length=60)
    version: str = Field(default="", max_length=60)
    policy: str = Field(default="base", max_length=200)
    passed: bool = False
    error_type: str | None = Field(default=None, max_length=60)
    finish: str = Field(default="completed", max_length=30)
    seconds: float = 0.0
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


async def add_run(session: AsyncSession, row: PublicRunRow) -> None:
    """Store one run; rerunning the same (round, stage, benchmark, entry) replaces it."""
    await _upsert(session, PublicRunRow, _values(row), ["round", "stage", "benchmark", "entry_id"])


async def runs(session: AsyncSession, round_no: int, stage: str, benchmark: str) -> list[PublicRunRow]:
    """One round's runs of one stage and benchmark, by entry id."""
    stmt = (
        select(PublicRunRow)
        .where(
            PublicRunRow.round == round_no, PublicRunRow.stage == stage, PublicRunRow.benchmark == benchmark
        )
        .order_by(PublicRunRow.entry_id)
    )
    return list((await session.exec(stmt)).all())


async def latest_runs_of(
    session: AsyncSession, policy: str, benchmark: str, version: str, *, before_round: int
) -> list[PublicRunRow]:
    """The runs of `policy` on `benchmark` at `version` from the newest earlier (round, stage)."""
    stmt = (
        select(PublicRunRow.round, PublicRunRow.stage)
        .where(
            PublicRunRow.policy == policy,
            PublicRunRow.benchmark == benchmark,
            PublicRunRow.version == version,
            col(PublicRunRow.round) < before_round,
        )
        .order_by(col(PublicRunRow.round).desc(), col(PublicRunRow.stage).desc())
        .limit(1)
    )
    newest = (await session.exec(stmt)).first()
    return [] if newest is None else await runs(session, int(newest[0]), str(newest[1]), benchmark)
