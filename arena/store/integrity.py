"""Store integrity checks, used by the fault-injection test and available to operators.

They catch what a crash at the wrong moment could leave behind if a transaction boundary were
wrong: duplicated episodes, completed rounds with unfinished phases, phases done out of order,
episodes that belong to no round or no task.
"""

from __future__ import annotations

import itertools

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlmodel import SQLModel, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store.tables import PHASES, EpisodeRow, PhaseRow, RoundRow, TaskRow


class IntegrityReport(BaseModel):
    """What `check_integrity` found; `ok` when `problems` is empty."""

    problems: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


async def check_integrity(session: AsyncSession, phases: tuple[str, ...] = PHASES) -> IntegrityReport:
    """Check the store's invariants and count the rows of every table."""
    report = IntegrityReport()
    for table in SQLModel.metadata.sorted_tables:
        count = (await session.exec(select(func.count()).select_from(table))).one()
        report.counts[table.name] = int(count)

    dupes = await session.exec(
        select(EpisodeRow.round, EpisodeRow.task_id, EpisodeRow.sample_idx, func.count())
        .group_by(EpisodeRow.round, EpisodeRow.task_id, EpisodeRow.sample_idx)
        .having(func.count() > 1)
    )
    for rnd, task, idx, n in dupes.all():
        report.problems.append(f"episode ({rnd}, {task}, {idx}) stored {n} times")

    no_round = await session.exec(
        select(func.count())
        .select_from(EpisodeRow)
        .where(~sa.exists().where(RoundRow.round == EpisodeRow.round))
    )
    if n := no_round.one():
        report.problems.append(f"{n} episodes belong to no round")
    no_task = await session.exec(
        select(func.count())
        .select_from(EpisodeRow)
        .where(~sa.exists().where(TaskRow.id == EpisodeRow.task_id))
    )
    if n := no_task.one():
        report.problems.append(f"{n} episodes belong to no task")

    rounds = (await session.exec(select(RoundRow))).all()
    all_phases = (await session.exec(select(PhaseRow))).all()
    by_round: dict[int, dict[str, str]] = {}
    for ph in all_phases:
        by_round.setdefault(ph.round, {})[ph.phase] = ph.status
    for rnd in rounds:
        statuses = by_round.get(rnd.round, {})
        missing = [p for p in phases if p not in statuses]
        if missing:
            report.problems.append(f"round {rnd.round} lacks phase rows {missing}")
        if rnd.status == "completed":
            unfinished = [p for p in phases if statuses.get(p) != "done"]
            if unfinished:
                report.problems.append(f"round {rnd.round} is completed but {unfinished} are not done")
        done = [statuses.get(p) == "done" for p in phases]
        # Phases run in order, so the done ones must be a prefix.
        if any(later and not earlier for earlier, later in itertools.pairwise(done)):
            report.problems.append(f"round {rnd.round} has phases done out of order: {statuses}")
    orphan_phase_rounds = set(by_round) - {r.round for r in rounds}
    if orphan_phase_rounds:
        report.problems.append(f"phase rows for missing rounds {sorted(orphan_phase_rounds)}")
    return report
