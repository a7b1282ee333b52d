"""How far the helper model can be trusted as judge and tool simulator: `arena bench sim --save` rows.

One row per measurement, keyed by an autoincrement id; `helper_id` names the helper measured
(`local:embedded`, `http:<model>@<base_url>`; see `simulate.backends.ModelSpec.identity`).
Rates are fractions in [0, 1] with their 95% Wilson bounds; a rate is NULL when nothing was
measured for it (no episode the verifier failed, for `false_pass`). `report` holds the whole JSON
report of the run (per environment, counts, cost). The conventions are `repo`'s: the caller
opens the transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Field, SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store.tables import _json, _ts, utcnow


class HelperFidelityRow(SQLModel, table=True):
    """One measurement of a helper against the executable environments' verifier and tools."""

    __tablename__ = "helper_fidelity"
    id: int | None = Field(default=None, primary_key=True)
    helper_id: str = Field(index=True, max_length=300)
    measured_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    episodes: int = 0  # judged executable episodes
    judge_agreement: float | None = None
    agreement_low: float | None = None
    agreement_high: float | None = None
    false_pass: float | None = None  # judge passes, verifier fails: share of the verifier's fails
    false_pass_low: float | None = None
    false_pass_high: float | None = None
    false_fail: float | None = None  # judge fails, verifier passes: share of the verifier's passes
    false_fail_low: float | None = None
    false_fail_high: float | None = None
    tool_fidelity: float | None = None  # share of the checks' facts the simulated tools reproduced
    report: dict[str, Any] = Field(default_factory=dict, sa_column=_json())


async def save_fidelity(session: AsyncSession, row: HelperFidelityRow) -> HelperFidelityRow:
    """Store one measurement (a new row every time); returns it with its id."""
    session.add(row)
    await session.flush()
    return row


async def latest_fidelity(session: AsyncSession, helper_id: str) -> HelperFidelityRow | None:
    """The newest measurement of `helper_id`, or None when it was never measured."""
    stmt = (
        select(HelperFidelityRow)
        .where(HelperFidelityRow.helper_id == helper_id)
        .order_by(col(HelperFidelityRow.measured_at).desc(), col(HelperFidelityRow.id).desc())
        .limit(1)
    )
    return (await session.exec(stmt)).first()
