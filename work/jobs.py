"""The typed work the daemon runs or sends to its Ray workers, and what comes back.

A `WorkItem` is one episode to run (a stored task and a sample index), an `EpisodeResult` what
running it produced, and an `EpisodeJob` what every item of one batch sent to the cluster shares.
The daemon's phases build them; `ops.cluster` sends them and a worker runs them through
`work.kit`, the same way the daemon's process does, so neither side imports the other.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from work.episode import EpisodeView


class WorkItem(BaseModel):
    """One episode to run: a task (as stored) and a sample index."""

    task_id: str
    env: str
    sample_idx: int
    task: dict[str, Any] = Field(default_factory=dict)


class EpisodeResult(BaseModel):
    """What running one work item produced."""

    reward: float
    passed: bool
    finish: str = "stop"
    # A str is the JSON text of one (`as_json_text`): how a cluster worker sends them.
    transcript: dict[str, Any] | str = Field(default_factory=dict)
    verdict: dict[str, Any] | str = Field(default_factory=dict)
    # Where the episode ran: "local", or "<node id>/<pid>" of the Ray worker (cluster mode).
    worker: str = "local"

    def as_json_text(self) -> EpisodeResult:
        """This result with its transcript and verdict encoded as JSON text.

        A cluster worker sends its results so: the daemon, the one committer of every worker's
        episodes, then neither rebuilds their structure off the wire nor encodes it for the store.
        """
        return self.model_copy(
            update={"transcript": _json_text(self.transcript), "verdict": _json_text(self.verdict)}
        )


def _json_text(value: dict[str, Any] | str) -> str:
    return value if isinstance(value, str) else json.dumps(value)


Runner = Callable[[WorkItem], Awaitable[EpisodeResult]]


@dataclass(frozen=True)
class BatchRunner:
    """A runner that takes up to `size` items per call, for cluster workers: each call costs the
    daemon and the worker a dispatch, which short episodes share this way."""

    run: Callable[[list[WorkItem]], Awaitable[list[EpisodeResult]]]
    size: int


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
    # A policy object to run instead of the worker's own (`arena bench scale`'s scripted fake).
    policy: Any = None
    # TRAIN's rollouts: the policy's tokenizer folder (token-exact prompts for the policy server).
    tokenizer_dir: str | None = None
    # `run`: the stored task JSON of every task the job's batches may name, by task id.
    tasks: dict[str, dict[str, Any]] = Field(default_factory=dict)
