"""Curriculum state: per-environment success EMA, difficulty, counts, and every decision with its reason."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.difficulty import Difficulty, KnobName


class CurriculumConfig(BaseModel):
    """How the controller and the sampler behave: the `[curriculum]` table of the daemon's settings.

    Defaults follow TRUSTEE's band idea (0.3–0.7).
    """

    # Unknown keys are typos more often than not: refuse them so they are not silently ignored.
    model_config = ConfigDict(extra="forbid", validate_default=True)

    band_low: float = Field(0.3, ge=0, le=1, description="Success rate below which difficulty goes down.")
    band_high: float = Field(0.7, ge=0, le=1, description="Success rate above which difficulty goes up.")
    ema_alpha: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Weight of the newest round in the success EMA and the difficulty evidence.",
    )
    min_episodes: int = Field(
        4, ge=1, description="Fewer episodes than this at the current difficulty: hold difficulty."
    )
    beta: float = Field(1.0, ge=0, description="Weight of diagnosed weakness in task sampling.")
    weight_floor: float = Field(0.05, gt=0, description="Lowest sampling weight of an environment.")
    min_tasks_per_env: int = Field(1, ge=0, description="Tasks per environment when the budget allows.")
    simulated_share: float = Field(0.3, ge=0, le=1, description="Share of tasks from simulated environments.")
    tasks_per_round: int = Field(32, ge=1, description="Training task budget per round.")
    weak_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Pass rate below which a diagnosed weak env or motif steers training (PLAN).",
    )

    @property
    def initial(self) -> Difficulty:
        """The difficulty a new environment starts at: every knob at its lowest level."""
        # Not a setting: the daemon's settings never had a key for it and no caller set it.
        return Difficulty()


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
