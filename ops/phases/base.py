"""The `Phase` protocol and the context the daemon hands each phase.

A phase does its work in `run(ctx)` and returns a JSON-able output; then the daemon opens one
transaction, calls `persist(session, ctx, output)` for the phase's own tables and marks the phase
done in the same transaction. Work items inside a phase (episodes, optimizer steps) must be
idempotent and should call `await ctx.safe_point()` between items: that is where pause and stop
take effect.

A later phase of the same round reads an earlier one's output only through its model
(`ctx.output(EvaluateOutput)`, models in `ops.phases.outputs`): a `PhaseOutput` names its phase,
and the stored output is checked against it when read, so a malformed one is a
`PhaseOutputError` naming the phase, never a silent default.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import PHASES, Store

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from ops.metrics import Metrics
    from ops.models import ModelHub

PHASE_ORDER: tuple[str, ...] = PHASES


class StopRequested(Exception):
    """Raised by `safe_point()` when the daemon is stopping; the phase stays unfinished."""


class PhaseOutputError(ValueError):
    """A phase's output is missing where it is required, or does not match its phase's model."""


class PhaseOutput(BaseModel):
    """The output of one phase, as later phases read it; a subclass names its phase in `phase`.

    Only the fields other code reads need be declared (typed precisely); every other key the
    phase returns is kept (`extra="allow"`), so the stored JSON and the report that reads it
    keep every figure.
    """

    model_config = ConfigDict(extra="allow")

    phase: ClassVar[str]

    def stored(self) -> dict[str, Any]:
        """The JSON form kept on the phase row: the keys the phase set, nothing filled in by a
        default, so the stored shape is the one the phase produced."""
        data = self.model_dump(mode="json")
        return {k: v for k, v in data.items() if k in self.model_fields_set}


Output = TypeVar("Output", bound=PhaseOutput)


def read_output(model: type[Output], data: Any, round_no: int) -> Output:
    """`data`, a stored output of `model.phase` in round `round_no`, checked against `model`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(output)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise PhaseOutputError(
            f"round {round_no}: the stored output of phase {model.phase!r} does not match "
            f"{model.__name__}: {problems}{more}"
        ) from exc


@dataclass
class PhaseContext:
    """What a phase may use."""

    round: int
    phase: str
    config: ArenaConfig
    store: Store
    metrics: Metrics
    models: ModelHub
    _safe_point: Callable[[], Awaitable[None]]
    _progress: Callable[[int, int, str], None]
    # Outputs of the phases already done in this round, by phase name, as stored (the daemon
    # loads those of a resumed round from the store). Private: read them through `output()`,
    # which checks each against its phase's model.
    _outputs: Mapping[str, dict[str, Any]] = field(default_factory=dict)
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

    def output(self, model: type[Output]) -> Output | None:
        """The output of `model.phase` in this round, checked against `model`; None while that phase
        has not run in this round. Raises `PhaseOutputError` when the stored output does not match."""
        data = self._outputs.get(model.phase)
        return None if data is None else read_output(model, data, self.round)

    def require_output(self, model: type[Output]) -> Output:
        """`output(model)`, where a missing output is an error (`PhaseOutputError`)."""
        out = self.output(model)
        if out is None:
            raise PhaseOutputError(
                f"round {self.round}: phase {self.phase!r} needs the output of phase {model.phase!r}, "
                "which has not run in this round"
            )
        return out

    def with_outputs(self, *outputs: PhaseOutput) -> PhaseContext:
        """A copy of this context that sees `outputs` (stored form) as done earlier in the round,
        beside those it had: how a caller running phases one by one, without the daemon, hands
        one phase's output to the next."""
        return replace(self, _outputs={**self._outputs, **{o.phase: o.stored() for o in outputs}})

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
