"""On PostgreSQL, episode transcripts are compressed with lz4 rather than pglz.

Transcripts are most of the store's bytes and every one is compressed as it is stored. lz4 does
that several times faster than PostgreSQL's default pglz at about the same size: the server's CPU
per stored episode fell by a third in `arena bench scale`, where the cluster's daemon commits every
worker's episodes. Existing rows keep their compression; new ones use lz4. A server without lz4
(built without it, or older than 14) keeps pglz, and the migration logs why.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
import structlog
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

log = structlog.get_logger(__name__)


def _set_compression(method: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return  # SQLite does not compress
    try:
        with bind.begin_nested():  # a savepoint: a refused ALTER leaves the migration's transaction usable
            bind.exec_driver_sql(f"ALTER TABLE episodes ALTER COLUMN transcript SET COMPRESSION {method}")
    except sa.exc.DBAPIError as exc:
        log.warning("store.transcript_compression_kept", wanted=method, error=str(exc.orig).splitlines()[0])


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("pglz")
