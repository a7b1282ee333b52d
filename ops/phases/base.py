"""The `Phase` protocol and the context the daemon hands each phase.

A phase does its work in `run(ctx)` and returns a JSON-able output; then the daemon opens one
transaction, calls `persist(session, ctx, output)` for the phase's own tables and marks the phase
done in the same transaction. Work items inside a phase (episodes, optimizer steps) must be
idempotent and should call `await ctx.safe_point()` between items: that is where pause and stop
take effect.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import structlog
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import PHASES, Store

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from ops.metrics import Metrics
    from ops.models import ModelHub

PHASE_ORDER: tuple[str, ...] = PHASES


class StopRequested(Exception):
    """Raised by `safe_point()` when the daemon is stopping; the phase stays unfinished."""


@dataclass
class PhaseContext:
    """What a phase may use."""

    round: int
    phase: str
    config: ArenaConfig
    store: Store
    metrics: Metrics
    models: ModelHub
    # Outputs of the phases already done in this round, by phase name.
    previous: dict[str, dict[str, Any]]
    _safe_point: Callable[[], Awaitable[None]]
    _progress: Callable[[int, int, str], None]
    log: Any = field(default_factory=lambda: structlog.get_logger("ops.phase"))
    # Whether the sandbox boundary could be created (the daemon's start-up probe; None: not probed).
    # Where it cannot, environments whose tools must run in it are left out of every phase.
    sandbox_available: bool | None = None
    # Cluster mode's episode workers (`ops.cluster.pool.WorkerPool`); None: episodes run in-process.
    cluster: Any = None

    async def safe_point(self) -> None:
        """Wait here while paused; raise `StopRequested` when the daemon is stopping."""
        await self._safe_point()

    async def may_go_on(self) -> bool:
        """Pass a safe point; False when the daemon is stopping. Concurrent work uses it so that
        the work under way finishes (and is committed) before the phase raises `StopRequested`."""
        try:
            await self._safe_point()
        except StopRequested:
            return False
        return True

    def progress(self, done: int, total: int, note: str = "") -> None:
        """Report progress of this phase (terminal bar, /status, metrics)."""
        self._progress(done, total, note)

    @property
    def seed(self) -> int:
        """A seed fixed for this round (so a restarted phase draws the same work)."""
        return self.config.daemon.seed * 1_000_003 + self.round


@runtime_checkable
class Phase(Protocol):
    """One step of a round."""

    name: str

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        """Do the phase's work; return its JSON-able output (stored on the phase row)."""
        ...

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        """Write the phase's own outputs inside the transaction that marks it done."""
        ...


class BasePhase:
    """Convenience base: no extra tables to write."""

    name: str = ""

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        """Nothing beyond the phase row's output."""
        return None
