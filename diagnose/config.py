"""The diagnosis agent's settings (`DiagnosisConfig`): the `[diagnosis]` table of the daemon's settings.

A module of its own, importing only pydantic, so that loading the daemon's settings does not load
the agent (`diagnose.agent`) and everything it imports.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DiagnosisConfig(BaseModel):
    """The agent, its budget and how much evidence goes into its prompt: the `[diagnosis]` table.

    When the budget (calls, tokens, seconds) is spent the fallback takes over. `agent` and
    `sandbox` are the caller's to honour: it passes `run_diagnosis` no helper, or no sandbox.
    """

    # Unknown keys are typos more often than not: refuse them so they are not silently ignored.
    model_config = ConfigDict(extra="forbid", validate_default=True)

    agent: bool = Field(True, description="Ask the helper; off: the statistical ranking only.")
    sandbox: bool = Field(True, description="Give the agent its sandboxed Python tool.")
    max_calls: int = Field(6, ge=1, le=100, description="Helper calls per diagnosis.")
    max_tokens: int = Field(40_000, ge=100, description="Tokens per diagnosis.")
    max_seconds: float = Field(300.0, gt=0, description="Wall time per diagnosis before the fallback.")
    # The daemon's settings also need at least 800 (`ops.config.ArenaConfig`); a test may ask for less.
    max_tokens_per_call: int = Field(
        2500,
        ge=16,
        le=32_768,
        description="Completion tokens per helper call; the report's schema is sized to fit (at least 800).",
    )
    max_weak: int = Field(5, ge=1, description="Weak environments reported at most.")
    trace_tokens: int = Field(
        1500, ge=0, description="Tokens of compacted failure traces in the agent's prompt, all together."
    )
    per_trace_tokens: int = Field(220, ge=40, description="Tokens of one compacted failure trace.")
    python_output_chars: int = Field(
        1500, ge=100, description="Characters of the agent's Python tool output it is shown back."
    )
