"""Curriculum state: per-environment success EMA, difficulty, counts, and every decision with its reason."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from arena.difficulty import Difficulty, KnobName


class CurriculumConfig(BaseModel):
    """How the controller and the sampler behave. Defaults follow TRUSTEE's band idea (0.3–0.7)."""

    band_low: float = Field(default=0.3, ge=0.0, le=1.0)
    band_high: float = Field(default=0.7, ge=0.0, le=1.0)
    ema_alpha: float = Field(default=0.5, gt=0.0, le=1.0, description="weight of the newest round")
    min_episodes: int = Field(default=4, ge=1, description="fewer episodes than this: hold")
    beta: float = Field(default=1.0, ge=0.0, description="weight of diagnosed weakness in sampling")
    weight_floor: float = Field(default=0.05, gt=0.0, description="no environment's weight goes below")
    min_tasks_per_env: int = Field(default=1, ge=0, description="when the budget allows")
    simulated_share: float = Field(
        default=0.3, ge=0.0, le=1.0, description="share of tasks from simulated envs"
    )
    initial: Difficulty = Field(default_factory=Difficulty)


class EnvCurriculum(BaseModel):
    """The controller's memory of one environment."""

    env: str
    difficulty: Difficulty = Field(default_factory=Difficulty)
    success_ema: float | None = None
    episodes: int = 0
    successes: int = 0
    rounds: int = 0
    # Knobs raised, most recent last: lowering undoes the most recent raise first.
    raised: list[KnobName] = Field(default_factory=list)
    # Evidence gathered since the difficulty last moved: episodes at exactly this difficulty, and
    # per probe ("walk_length+1", "ambiguity-1": one knob one level away) [passed, episodes].
    # Older rounds count with weight (1 - ema_alpha) per round, so a learner that improves is not
    # judged by what it did long ago (fractional counts; the Wilson interval takes them).
    level_passed: float = 0.0
    level_episodes: float = 0.0
    probes: dict[str, list[float]] = Field(default_factory=dict)

    def moved(self) -> None:
        """Forget the evidence of the old difficulty (it no longer describes the new one)."""
        self.success_ema = None
        self.level_passed = self.level_episodes = 0
        self.probes = {}


DecisionAction = Literal["raise", "lower", "hold", "insufficient"]


class Decision(BaseModel):
    """One controller decision, persisted for operators and Grafana."""

    round: int
    env: str
    action: DecisionAction
    knob: KnobName | None = None
    from_level: int | None = None
    to_level: int | None = None
    success_rate: float | None = None
    success_ema: float | None = None
    # The evidence the decision rests on: episodes at the current difficulty since it last moved,
    # with the Wilson 95% interval of their success rate.
    passed: float | None = None
    episodes: float | None = None
    interval: tuple[float, float] | None = None
    reason: str


class CurriculumState(BaseModel):
    """The whole curriculum: one record per environment, and the round it was last updated for."""

    round: int = 0
    envs: dict[str, EnvCurriculum] = Field(default_factory=dict)

    def env(self, name: str, initial: Difficulty | None = None) -> EnvCurriculum:
        """The record of one environment, created at the initial difficulty on first use."""
        if name not in self.envs:
            self.envs[name] = EnvCurriculum(env=name, difficulty=initial or Difficulty())
        return self.envs[name]


class EpisodeOutcome(BaseModel):
    """What the controller needs from one verified episode."""

    env: str
    passed: bool
    difficulty: Difficulty = Field(default_factory=Difficulty)
