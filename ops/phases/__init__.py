"""The six phases of a round, one module each (see `base.Phase` for the protocol)."""

from __future__ import annotations

from ops.phases.base import (
    PHASE_ORDER,
    BasePhase,
    Phase,
    PhaseContext,
    PhaseOutput,
    PhaseOutputError,
    StopRequested,
)


def default_phases() -> list[Phase]:
    """EVALUATE, DIAGNOSE, PLAN, SYNTHESIZE, TRAIN, PUBLISH."""
    from ops.phases.diagnose import DiagnosePhase
    from ops.phases.evaluate import EvaluatePhase
    from ops.phases.plan import PlanPhase
    from ops.phases.publish import PublishPhase
    from ops.phases.synthesize import SynthesizePhase
    from ops.phases.train import TrainPhase

    return [EvaluatePhase(), DiagnosePhase(), PlanPhase(), SynthesizePhase(), TrainPhase(), PublishPhase()]


__all__ = [
    "PHASE_ORDER",
    "BasePhase",
    "Phase",
    "PhaseContext",
    "PhaseOutput",
    "PhaseOutputError",
    "StopRequested",
    "default_phases",
]
