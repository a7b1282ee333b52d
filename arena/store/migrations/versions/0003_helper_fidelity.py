"""Helper fidelity: how far the helper's judge and tool simulation agree with executable envs.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# The rates and their 95% Wilson bounds (NULL when nothing was measured for a rate).
_RATES = (
    "judge_agreement",
    "agreement_low",
    "agreement_high",
    "false_pass",
    "false_pass_low",
    "false_pass_high",
    "false_fail",
    "false_fail_low",
    "false_fail_high",
    "tool_fidelity",
)


def upgrade() -> None:
    op.create_table(
        "helper_fidelity",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("helper_id", sa.String(length=300), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("episodes", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.Float(), nullable=True) for name in _RATES),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_helper_fidelity_helper_id", "helper_fidelity", ["helper_id"])


def downgrade() -> None:
    op.drop_index("ix_helper_fidelity_helper_id", table_name="helper_fidelity")
    op.drop_table("helper_fidelity")
