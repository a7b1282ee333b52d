"""The outputs one phase of a round hands to a later one, typed (`PhaseContext.output` reads them).

Each model names its phase and declares, typed precisely, the fields a later phase reads (and a
few its producer always writes); any other key the phase returns is kept as it is (`extra="allow"`),
so the stored JSON `arena report`, `arena status` and the learning bench read is unchanged. A
producer builds its output through its model (`Model(...).stored()`), so the shape is checked
where it is made as well as where it is read. Optional fields are those a producer leaves out
on one of its paths (TRAIN with no tasks has no parent); every field a producer always writes is
required, so a stored output without it is an error, not a default.

Readers: PLAN reads EVALUATE's arena and training split (and the previous round's TRAIN rollouts
from the store); SYNTHESIZE reads PLAN's allocation, guidelines, spread, simulated points,
complexification and new environments; TRAIN reads SYNTHESIZE's task list; PUBLISH reads TRAIN's
checkpoint and lineage and EVALUATE's pass rates.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from arena.difficulty import Difficulty
from arena.synth.motifs import MotifName
from arena.synth.targeted import Guideline
from curriculum.sampling import Allocation
from diagnose.new_envs import NewEnvRequest
from ops.phases.base import PhaseOutput
from trainer.metrics import TaskOutcome


class EvaluateOutput(PhaseOutput):
    """EVALUATE: the round's held-out arena, the training split, and the fresh pass rates."""

    phase: ClassVar[str] = "evaluate"

    arena: list[str] = Field(description="The held-out arena environments drawn this round.")
    training: list[str] = Field(description="The environments training may use (never the yardstick's).")
    pass_rates: dict[str, float] = Field(description="Fresh-task pass rate per evaluated environment.")


class DifficultyPoint(BaseModel):
    """`n` tasks at one difficulty."""

    difficulty: Difficulty
    n: int = Field(ge=0)


class ComplexifyRequest(BaseModel):
    """An environment whose database SYNTHESIZE grows by `rows` rows, and why."""

    env: str
    why: str = ""
    rows: int = Field(ge=1)


class PlanOutput(PhaseOutput):
    """PLAN: what SYNTHESIZE makes this round (the curriculum state and decisions ride along)."""

    phase: ClassVar[str] = "plan"

    allocation: Allocation = Field(description="Training tasks per environment, and the weights behind it.")
    guidelines: list[Guideline] = Field(
        description="Targeted tasks: a weak motif mapped onto an environment."
    )
    spread: dict[str, list[DifficultyPoint]] = Field(
        description="Plain graph tasks per executable environment: its current level and probes around it."
    )
    simulated: dict[str, DifficultyPoint] = Field(
        description="TRUSTEE tasks per simulated environment, at its current difficulty."
    )
    complexify: list[ComplexifyRequest] = Field(description="At most one database to grow.")
    new_envs: list[NewEnvRequest] = Field(description="Environments SYNTHESIZE is asked to build.")


class SynthesizedTask(BaseModel):
    """One line of SYNTHESIZE's task list (the task itself is stored with the round)."""

    id: str = Field(description="The task's full id (ENV/ID), its key in the store.")
    env: str
    origin: str
    difficulty: dict[str, float | int | str]
    motif: MotifName | None = Field(description="The weak motif a targeted task was aimed at.")
    skill: str | None
    exercises: list[MotifName] = Field(description="The motifs the task's reference walk exercises.")


class SynthesizeOutput(PhaseOutput):
    """SYNTHESIZE: the round's training tasks (with counts, acceptance and reports beside them)."""

    phase: ClassVar[str] = "synthesize"

    tasks: list[SynthesizedTask]


class GrpoSummary(BaseModel):
    """TRAIN's GRPO result as stored (`trainer.metrics.TrainResult` less its step records)."""

    model_config = ConfigDict(extra="allow")

    task_outcomes: list[TaskOutcome] = Field(
        default_factory=list, description="Per task, how its rollouts went (the next PLAN learns from them)."
    )


class TrainOutput(PhaseOutput):
    """TRAIN: the checkpoint it wrote (None: nothing trained) and where it started from."""

    phase: ClassVar[str] = "train"

    checkpoint: str | None = Field(description="The trained policy's folder; None when nothing trained.")
    steps: int = Field(ge=0, description="GRPO optimizer steps taken.")
    skipped: str | None = Field(default=None, description="Why nothing trained.")
    parent: str | None = Field(
        default=None, description="The published checkpoint trained from (None: base)."
    )
    parent_dir: str | None = Field(default=None, description="That policy's folder.")
    reward_mean: float | None = None
    pass_rate: float | None = None
    grpo: GrpoSummary | None = None

    def rollouts(self) -> list[TaskOutcome]:
        """The GRPO rollouts' outcomes, per task (none when nothing trained)."""
        return self.grpo.task_outcomes if self.grpo is not None else []
