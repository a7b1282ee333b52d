"""What the daemon and the worker processes of a multi-process GRPO round exchange (`trainer.sharded`).

The daemon writes a `ShardJob` file and starts the workers with `accelerate launch`; while they
train, they talk to the daemon's coordinator (an HTTP app on 127.0.0.1 that only they know the
token of):

- `POST /rollout` (`RolloutRequest` → `RolloutReply`): each rank sends the task keys TRL gave it
  for a generation batch; once every rank has, the daemon runs the whole batch's episodes against
  the policy server and answers each rank with its slice of TRL's rollout dictionary;
- `POST /step` (`StepReport` → `StepReply`, rank 0 only): after each optimizer step, its metrics
  and the checkpoint rank 0 saved; the daemon publishes the checkpoint to the policy server,
  reports the step and runs its safe point, and answers whether the workers stop.

When training ends, rank 0 writes a `ShardResult` beside the job file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainer.config import TrainerConfig
from trainer.metrics import CheckpointInfo, RolloutStats, StepMetrics

JOB_FILE = "job.json"
RESULT_FILE = "result.json"
ACCELERATE_FILE = "accelerate.json"
LOG_FILE = "worker.log"
TOKEN_HEADER = "x-arena-shard-token"


class ShardJob(BaseModel):
    """Everything a worker needs to train its part of one `train_round` call (no store, no secrets
    beyond the coordinator's token: the daemon keeps the helpers, the sandbox and the store)."""

    round_id: int
    task_keys: list[str]  # the prepared tasks: the dataset's prompts (`trainer.rollout.task_prompt`)
    policy_dir: Path  # the policy the round started from (lineage parent, KL reference)
    start_dir: Path  # the weights this call starts from (policy_dir or the resumed checkpoint)
    out_dir: Path  # checkpoints go to out_dir/checkpoints, as in one process
    offset: int  # steps already done in this round (resume)
    prior_seconds: float
    max_steps: int  # optimizer steps of this call
    config: TrainerConfig
    coordinator: str  # the daemon's coordinator, http://127.0.0.1:PORT
    token: str


class RolloutRequest(BaseModel):
    """One rank's share of a generation batch: the `call`-th time TRL asked this rank for rollouts."""

    rank: int
    call: int
    step: int
    keys: list[str]


class RolloutReply(BaseModel):
    """TRL's rollout dictionary for the rank's keys, and the whole batch's statistics."""

    # NaN stays NaN on the wire (pydantic writes null by default): a sampler log-prob that is
    # unknown is NaN, which TRL's correction weighs 1 (`trainer.rollout.sampler_logprobs`).
    model_config = ConfigDict(ser_json_inf_nan="constants")

    output: dict[str, list[Any]]
    stats: RolloutStats


class StepReport(BaseModel):
    """Rank 0 after an optimizer step."""

    model_config = ConfigDict(ser_json_inf_nan="constants")  # a diverged step's NaN loss arrives as NaN

    metrics: StepMetrics
    checkpoint: CheckpointInfo | None = None
    last: bool = False


class StepReply(BaseModel):
    """Whether the workers stop after this step (the daemon's safe point raised)."""

    stop: bool = False


class RankInfo(BaseModel):
    """What one worker process did: it proves every rank trained its share."""

    rank: int
    world_size: int
    pid: int
    device: str
    distributed_type: str  # accelerate's (FSDP, MULTI_GPU, MULTI_CPU)
    sequences: int = 0  # rollout entries it trained on


class ShardResult(BaseModel):
    """Written by rank 0 when the workers are done."""

    ranks: list[RankInfo] = Field(default_factory=list)
    steps: int = 0
    stopped: bool = False
