"""Initial schema: every table of arena/store/tables.py.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.String(length=200), nullable=True),
        sa.Column("path", sa.String(length=1000), nullable=False),
        sa.Column("published", sa.Boolean(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_checkpoints_round", "checkpoints", ["round"])

    op.create_table(
        "curriculum_state",
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("difficulty", sa.Float(), nullable=False),
        sa.Column("budget", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("pass_history", sa.JSON(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("env"),
    )
    op.create_table(
        "daemon_state",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("paused_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pause_reason", sa.String(length=500), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "diagnosis_reports",
        sa.Column("round", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("round"),
    )
    op.create_table(
        "environments",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("version", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("origin", sa.String(length=20), nullable=False),
        sa.Column("category", sa.JSON(), nullable=False),
        sa.Column("path", sa.String(length=1000), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "episodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=200), nullable=False),
        sa.Column("sample_idx", sa.Integer(), nullable=False),
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("purpose", sa.String(length=20), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("finish", sa.String(length=20), nullable=False),
        sa.Column("transcript", sa.JSON(), nullable=False),
        sa.Column("verdict", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("round", "task_id", "sample_idx", name="uq_episode_key"),
    )
    op.create_index("ix_episodes_env", "episodes", ["env"])
    op.create_index("ix_episodes_round", "episodes", ["round"])

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=50), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_events_action", "events", ["action"])

    op.create_table(
        "phases",
        sa.Column("round", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("phase", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("output", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("round", "phase"),
    )
    op.create_table(
        "rounds",
        sa.Column("round", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("round"),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("origin", sa.String(length=20), nullable=False),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_tasks_env", "tasks", ["env"])
    op.create_index("ix_tasks_round", "tasks", ["round"])


def downgrade() -> None:
    op.drop_index("ix_tasks_round", table_name="tasks")
    op.drop_index("ix_tasks_env", table_name="tasks")

    op.drop_table("tasks")
    op.drop_table("rounds")
    op.drop_table("phases")
    op.drop_index("ix_events_action", table_name="events")

    op.drop_table("events")
    op.drop_index("ix_episodes_round", table_name="episodes")
    op.drop_index("ix_episodes_env", table_name="episodes")

    op.drop_table("episodes")
    op.drop_table("environments")
    op.drop_table("diagnosis_reports")
    op.drop_table("daemon_state")
    op.drop_table("curriculum_state")
    op.drop_index("ix_checkpoints_round", table_name="checkpoints")

    op.drop_table("checkpoints")
