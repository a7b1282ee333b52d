"""The difficulty knobs that task synthesis understands and the curriculum turns.

A `Difficulty` is a point in a small, discrete space. Synthesis reads it to decide how long the
tool walk is, how implicit the instruction is, how many distractor tools to show and whether the
task is conversational (Agent-World / EnvFactory knobs), and the TRUSTEE-style simulated task
generator maps the same knobs onto tool-subset size, expected turns and persona expertise.
Keeping the space here, in the bottom layer, lets `curriculum` move along it without knowing how
tasks are made.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

KnobName = Literal["walk_length", "ambiguity", "weak_edge_share", "distractors", "conversational"]


class KnobSpec(BaseModel):
    """One knob: its integer level range and what a level means."""

    model_config = ConfigDict(frozen=True)

    name: KnobName
    min_level: int = 0
    max_level: int
    # Added to a simple additive difficulty score; used by simulated learners in tests and by the
    # deterministic fallback ranking, never by synthesis itself.
    weight: float = 1.0
    meaning: str


KNOBS: dict[KnobName, KnobSpec] = {
    spec.name: spec
    for spec in (
        KnobSpec(
            name="walk_length",
            min_level=1,
            max_level=6,
            weight=0.8,
            meaning="number of tool calls in the reference solution",
        ),
        KnobSpec(
            name="ambiguity",
            max_level=2,
            weight=0.9,
            meaning="0 explicit ids, 1 implicit references (names, 'my last order'), 2 goal only",
        ),
        KnobSpec(
            name="weak_edge_share",
            max_level=4,
            weight=0.4,
            meaning="quarters of the walk's edges that are weak or independent rather than strong",
        ),
        KnobSpec(
            name="distractors",
            max_level=4,
            weight=0.3,
            meaning="extra tools from other environments shown to the agent, in steps of two",
        ),
        KnobSpec(
            name="conversational",
            max_level=1,
            weight=0.6,
            meaning="0 autonomous, 1 conversational (a simulated user reveals the intent gradually)",
        ),
    )
}

# The order in which the curriculum raises knobs: structure first, then vagueness, then noise.
RAISE_ORDER: tuple[KnobName, ...] = (
    "walk_length",
    "ambiguity",
    "weak_edge_share",
    "conversational",
    "distractors",
)


class Difficulty(BaseModel):
    """A point in the knob space. Levels are clamped to each knob's range on construction."""

    model_config = ConfigDict(frozen=True)

    walk_length: int = Field(default=2, ge=1, le=6)
    ambiguity: int = Field(default=0, ge=0, le=2)
    weak_edge_share: int = Field(default=0, ge=0, le=4)
    distractors: int = Field(default=0, ge=0, le=4)
    conversational: int = Field(default=0, ge=0, le=1)

    def level(self, knob: KnobName) -> int:
        """The level of one knob."""
        return int(getattr(self, knob))

    def with_level(self, knob: KnobName, level: int) -> Difficulty:
        """A copy with one knob moved (clamped to its range)."""
        spec = KNOBS[knob]
        clamped = max(spec.min_level, min(spec.max_level, level))
        return self.model_copy(update={knob: clamped})

    def score(self) -> float:
        """A scalar summary: the weighted sum of levels above each knob's minimum."""
        return sum(spec.weight * (self.level(name) - spec.min_level) for name, spec in KNOBS.items())

    def as_dict(self) -> dict[str, int]:
        """Plain dict form, as stored on tasks (`Task.difficulty`)."""
        return {name: self.level(name) for name in KNOBS}
