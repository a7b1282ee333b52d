"""The `[public]` section: the public yardstick (benchmarks Arena did not write, run every round)."""

from __future__ import annotations

from pydantic import Field, field_validator

from arena.public.bfcl.dist import CATEGORIES
from arena.public.bfcl.model import MAX_STEPS_PER_TURN
from ops.config_sections import ConfigSection


class PublicConfig(ConfigSection):
    """BFCL multi-turn beside Arena's own yardstick, once imported (`arena envs import-bfcl`)."""

    bfcl_per_category: int = Field(
        2,
        ge=0,
        le=1000,
        description="BFCL entries per category run every round (a fixed sample drawn with daemon.seed; "
        "200: every entry; 0: off). Runs once `arena envs import-bfcl` imported the benchmark.",
    )
    bfcl_categories: list[str] = Field(
        default_factory=lambda: list(CATEGORIES),
        min_length=1,
        description="BFCL multi-turn categories of the public yardstick (a JSON list or comma-separated).",
    )
    bfcl_max_steps: int = Field(
        MAX_STEPS_PER_TURN,
        ge=1,
        le=1000,
        description="Policy steps with calls per user turn before a BFCL entry ends failed (BFCL's own cap: 20).",
    )
    publish_gate: bool = Field(
        False,
        description="Also hold back a trained policy whose public-yardstick accuracy is below the lower bound "
        "of its parent's 95% interval on the same entries (needs trainer.publish_gate).",
    )

    @field_validator("bfcl_categories", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("bfcl_categories")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in CATEGORIES]
        if unknown:
            raise ValueError(f"unknown BFCL categories {unknown} (known: {', '.join(CATEGORIES)})")
        return list(dict.fromkeys(value))
