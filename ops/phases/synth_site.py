"""`SynthesisSite`: what running a synthesis request takes of the process that runs it.

The daemon's phases build one from their context (`SynthesisSite.of`); a cluster worker builds one
from its own models, metrics and configuration. Neither hands the work a context it does not have.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ops.config_sections import SynthesisConfig
    from ops.metrics import Metrics
    from ops.phases.base import PhaseContext
    from work.kit import ModelSource


@dataclass(frozen=True)
class SynthesisSite:
    """The round, this process's models and metrics, the `[synthesis]` settings, and the safe point
    between attempts (the daemon's pause and stop; a worker's returns at once, since the daemon
    stops sending it requests instead)."""

    round: int
    models: ModelSource
    metrics: Metrics
    synthesis: SynthesisConfig
    safe_point: Callable[[], Awaitable[None]]

    @classmethod
    def of(cls, ctx: PhaseContext) -> SynthesisSite:
        """A phase's site: its round, models, metrics, settings and safe point."""
        return cls(
            round=ctx.round,
            models=ctx.models,
            metrics=ctx.metrics,
            synthesis=ctx.config.synthesis,
            safe_point=ctx.safe_point,
        )


async def no_safe_point() -> None:
    """A worker's safe point: pause and stop are the daemon's, which stops sending work."""
    return None
