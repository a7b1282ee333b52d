"""The `[public]` section: the public yardstick (benchmarks Arena did not write, run every round)."""

from __future__ import annotations

from pydantic import Field, field_validator

from arena.public.bfcl.dist import CATEGORIES
from arena.public.bfcl.model import MAX_STEPS_PER_TURN
from ops.config_sections import ConfigSection

TAU2_DOMAINS = ("retail", "airline")


class PublicConfig(ConfigSection):
    """Benchmarks Arena did not write beside its own yardstick, once imported: BFCL multi-turn
    (`arena envs import-bfcl`) and τ²-bench's retail and airline (`arena envs import-tau2`)."""

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
    tau2_per_domain: int = Field(
        1,
        ge=0,
        le=1000,
        description="τ²-bench tasks per imported domain run every round (a fixed sample drawn with daemon.seed; "
        "0: off). Runs once `arena envs import-tau2` imported the domain.",
    )
    tau2_domains: list[str] = Field(
        default_factory=lambda: list(TAU2_DOMAINS),
        min_length=1,
        description="τ²-bench domains of the public yardstick (a JSON list or comma-separated); "
        "a domain not imported is skipped.",
    )
    tau2_max_steps: int = Field(
        200,
        ge=1,
        le=1000,
        description="Steps of one τ² task before it ends as `max_steps`, which scores 0 as in τ² (a step is "
        "a message of the agent or the user, or a tool result, as τ² counts them; τ²'s own default: 200).",
    )
    publish_gate: bool = Field(
        False,
        description="Also hold back a trained policy whose public-yardstick accuracy is below the lower bound "
        "of its parent's 95% interval on the same entries (needs trainer.publish_gate).",
    )

    @field_validator("bfcl_categories", "tau2_domains", mode="before")
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

    @field_validator("tau2_domains")
    @classmethod
    def _known_domains(cls, value: list[str]) -> list[str]:
        unknown = [d for d in value if d not in TAU2_DOMAINS]
        if unknown:
            raise ValueError(f"unknown τ² domains {unknown} (known: {', '.join(TAU2_DOMAINS)})")
        return list(dict.fromkeys(value))
