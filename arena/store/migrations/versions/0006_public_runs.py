"""The public yardstick: each round's runs of held-out public benchmark entries (BFCL multi-turn).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "public_runs",
        sa.Column("round", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("stage", sa.String(length=20), nullable=False),
        sa.Column("benchmark", sa.String(length=40), nullable=False),
        sa.Column("entry_id", sa.String(length=200), nullable=False),
        sa.Column("category", sa.String(length=60), nullable=False),
        sa.Column("version", sa.String(length=60), nullable=False),
        sa.Column("policy", sa.String(length=200), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("error_type", sa.String(length=60), nullable=True),
        sa.Column("finish", sa.String(length=30), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("round", "stage", "benchmark", "entry_id"),
    )


def downgrade() -> None:
    op.drop_table("public_runs")
