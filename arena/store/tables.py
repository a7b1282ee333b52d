"""The arena store's tables (sqlmodel).

Rich objects (tasks, transcripts, verdicts, reports) are stored as JSON columns holding their
pydantic dumps, so the schema stays small while the objects evolve. The Alembic migrations under
`migrations/versions/` must create exactly these tables; a test compares the two.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

PHASES: tuple[str, ...] = ("evaluate", "diagnose", "plan", "synthesize", "train", "publish")


def utcnow() -> datetime:
    """Now, in UTC (all store timestamps are UTC)."""
    return datetime.now(UTC)


class JsonText(str):
    """A JSON document already encoded (by a cluster worker): the store writes it as it is.

    The daemon commits every worker's episodes; decoding a transcript off the wire only to encode
    it again for the JSON column was most of its CPU per episode.
    """


def encode_json(value: Any) -> str:
    """The JSON columns' encoder (the engine's `json_serializer`): `JsonText` passes through."""
    return value if isinstance(value, JsonText) else json.dumps(value)


def _json() -> Any:
    return sa.Column(sa.JSON, nullable=False)


def _ts(nullable: bool = False) -> Any:
    return sa.Column(sa.DateTime(timezone=True), nullable=nullable)


class EnvironmentRow(SQLModel, table=True):
    """A registered environment (one folder at one content version)."""

    __tablename__ = "environments"
    name: str = Field(primary_key=True, max_length=200)
    version: str = Field(max_length=100)
    kind: str = Field(max_length=20)
    origin: str = Field(max_length=20)
    category: list[str] = Field(default_factory=list, sa_column=_json())
    path: str = Field(default="", max_length=1000)
    registered_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class TaskRow(SQLModel, table=True):
    """A task; `data` is the `arena.tasks.Task` dump."""

    __tablename__ = "tasks"
    id: str = Field(primary_key=True, max_length=200)
    env: str = Field(index=True, max_length=200)
    origin: str = Field(max_length=20)
    round: int | None = Field(default=None, index=True)
    data: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class EpisodeRow(SQLModel, table=True):
    """One episode, keyed by (round, task_id, sample_idx) so that reruns are idempotent."""

    __tablename__ = "episodes"
    __table_args__ = (sa.UniqueConstraint("round", "task_id", "sample_idx", name="uq_episode_key"),)
    id: int | None = Field(default=None, primary_key=True)
    round: int = Field(index=True)
    task_id: str = Field(max_length=200)
    sample_idx: int
    env: str = Field(index=True, max_length=200)
    purpose: str = Field(default="eval", max_length=20)
    reward: float = 0.0
    passed: bool = False
    finish: str = Field(default="stop", max_length=20)
    transcript: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    verdict: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    # Where it ran: "local" (the daemon's process) or a Ray worker, "<node id>/<pid>" (cluster mode).
    worker: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class RoundRow(SQLModel, table=True):
    """One round; `status` is running or completed."""

    __tablename__ = "rounds"
    round: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    status: str = Field(default="running", max_length=20)
    started_at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    finished_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    summary: dict[str, Any] = Field(default_factory=dict, sa_column=_json())


class PhaseRow(SQLModel, table=True):
    """One phase of one round: pending, running, done or failed, with its output."""

    __tablename__ = "phases"
    round: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    phase: str = Field(primary_key=True, max_length=20)
    status: str = Field(default="pending", max_length=20)
    attempts: int = 0
    started_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    finished_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    error: str | None = Field(default=None, sa_column=sa.Column(sa.Text, nullable=True))
    output: dict[str, Any] = Field(default_factory=dict, sa_column=_json())


class EventRow(SQLModel, table=True):
    """Audit log of admin actions and notable daemon decisions."""

    __tablename__ = "events"
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, sa_column=_ts())
    actor: str = Field(max_length=100)
    action: str = Field(max_length=50, index=True)
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=_json())


class DaemonStateRow(SQLModel, table=True):
    """The daemon's persisted switches (one row, id 1)."""

    __tablename__ = "daemon_state"
    id: int = Field(default=1, primary_key=True, sa_column_kwargs={"autoincrement": False})
    paused: bool = False
    paused_since: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    pause_reason: str = Field(default="", max_length=500)
    updated_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class CurriculumStateRow(SQLModel, table=True):
    """Per-environment difficulty and budget, as of the round that last updated it."""

    __tablename__ = "curriculum_state"
    env: str = Field(primary_key=True, max_length=200)
    difficulty: float = 0.3
    budget: int = 0
    round: int = 0
    pass_history: list[float] = Field(default_factory=list, sa_column=_json())
    data: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class DiagnosisReportRow(SQLModel, table=True):
    """The diagnosis of one round; `source` is llm or statistical."""

    __tablename__ = "diagnosis_reports"
    round: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    source: str = Field(max_length=20)
    report: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class CheckpointRow(SQLModel, table=True):
    """A policy checkpoint and its lineage."""

    __tablename__ = "checkpoints"
    id: str = Field(primary_key=True, max_length=200)
    round: int = Field(index=True)
    parent_id: str | None = Field(default=None, max_length=200)
    path: str = Field(max_length=1000)
    published: bool = False
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class YardstickTaskRow(SQLModel, table=True):
    """A task of the yardstick: drawn once per arena environment and level, never trained on.

    `data` is the `arena.tasks.Task` dump; `env_version` is the environment's content version when
    the task was drawn (a later version is reported, never silently redrawn).
    """

    __tablename__ = "yardstick_tasks"
    id: str = Field(primary_key=True, max_length=200)
    env: str = Field(index=True, max_length=200)
    level: str = Field(max_length=20)
    version: int = 1
    env_version: str = Field(default="", max_length=100)
    data: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


class YardstickRunRow(SQLModel, table=True):
    """One greedy episode of a yardstick task, keyed by (round, stage, task) so reruns are idempotent.

    `stage` is `live` (the policy EVALUATE measured) or `candidate` (the policy PUBLISH gated);
    `policy` names the checkpoint measured (`base` before the first publish).
    """

    __tablename__ = "yardstick_runs"
    round: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    stage: str = Field(primary_key=True, max_length=20)
    task_id: str = Field(primary_key=True, max_length=200)
    env: str = Field(max_length=200)
    level: str = Field(max_length=20)
    policy: str = Field(default="base", max_length=200)
    passed: bool = False
    reward: float = 0.0
    finish: str = Field(default="stop", max_length=20)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_ts())


metadata = SQLModel.metadata
