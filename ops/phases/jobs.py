"""`EpisodeJob`: what every item of one batch of work sent to the cluster's workers shares.

The work modules that dispatch to the cluster (`eval_runner`'s episodes, `synth_requests`' task
synthesis, `ops.cluster.rollouts`' TRAIN rollouts) build it; `ops.cluster` sends it and the worker
reads it. It sits here, under both, so that the work the Ray worker runs never imports
`ops.cluster` back.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from work.episode import EpisodeView


class EpisodeJob(BaseModel):
    """What every episode of one phase's batch shares (sent to the cluster once per batch)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # One per batch the daemon sends: the worker prepares each task once per job, not per episode.
    job_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    round: int
    phase: str
    # The prompts, tool view, caps, sampling and reward rules of the episodes (None: synthesis only).
    view: EpisodeView | None = None
    policy_weights: str | None = None  # the published checkpoint a local policy backend runs
    needs_sandbox: bool = False
    sandbox_available: bool | None = None
    # The policy replicas serving the live weights as the daemon sees them (None: not an http
    # policy). Only the daemon publishes and restores replicas; a worker samples from these alone.
    policy_replicas: list[str] | None = None
    # A policy object to run instead of `models.policy` (`arena bench scale`'s scripted fake).
    policy: Any = None
    # TRAIN's rollouts: the policy's tokenizer folder (token-exact prompts for the policy server).
    tokenizer_dir: str | None = None
    # `run`: the stored task JSON of every task the job's batches may name, by task id.
    tasks: dict[str, dict[str, Any]] = Field(default_factory=dict)
