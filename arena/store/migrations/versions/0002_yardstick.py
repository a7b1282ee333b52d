"""The yardstick: its fixed tasks and the greedy runs of each round.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "yardstick_tasks",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("level", sa.String(length=20), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("env_version", sa.String(length=100), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_yardstick_tasks_env", "yardstick_tasks", ["env"])
    op.create_table(
        "yardstick_runs",
        sa.Column("round", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("stage", sa.String(length=20), nullable=False),
        sa.Column("task_id", sa.String(length=200), nullable=False),
        sa.Column("env", sa.String(length=200), nullable=False),
        sa.Column("level", sa.String(length=20), nullable=False),
        sa.Column("policy", sa.String(length=200), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("finish", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("round", "stage", "task_id"),
    )


def downgrade() -> None:
    op.drop_table("yardstick_runs")
    op.drop_index("ix_yardstick_tasks_env", table_name="yardstick_tasks")
    op.drop_table("yardstick_tasks")
