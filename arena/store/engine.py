"""The store's async engine, transactions and migrations.

SQLite (aiosqlite) runs in WAL mode with a busy timeout, and every transaction starts with
`BEGIN IMMEDIATE`: a deferred transaction that reads and then writes can fail at once with
"database is locked" when another connection writes first, whereas an immediate one waits for the
busy timeout. PostgreSQL (asyncpg) needs nothing special.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import structlog
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store.tables import encode_json

log = structlog.get_logger(__name__)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Any fixed 64-bit number: serializes concurrent `upgrade` runs against one PostgreSQL database.
_PG_MIGRATION_LOCK = 0x4152454E41


class StoreError(RuntimeError):
    """The store cannot be opened or migrated (message says which URL and why)."""


def make_engine(url: str, *, busy_timeout_s: float = 30.0, pool_size: int = 5) -> AsyncEngine:
    """An async engine for `url`, configured for the dialect."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(
            url, connect_args={"timeout": busy_timeout_s}, json_serializer=encode_json
        )
        _configure_sqlite(engine, busy_timeout_s)
        return engine
    return create_async_engine(
        url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True, json_serializer=encode_json
    )


def _configure_sqlite(engine: AsyncEngine, busy_timeout_s: float) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" hook emit BEGIN itself (the driver's implicit BEGIN is deferred).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


class Store:
    """The arena store: an async engine plus transaction and migration helpers."""

    def __init__(self, url: str, *, busy_timeout_s: float = 30.0, pool_size: int = 5) -> None:
        self.url = url
        self.engine = make_engine(url, busy_timeout_s=busy_timeout_s, pool_size=pool_size)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.engine.dialect.name

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on success, rolled back on any error.

        A transaction is never cut by cancellation: a cancel that arrives inside it takes effect
        at the caller's next checkpoint after the transaction ends. SQLAlchemy treats a cancel in
        the middle of a statement as a lost connection and closes it from a task of its own, which
        anyio's repeated cancellation leaves pending; on SQLite that connection kept the write lock
        of `BEGIN IMMEDIATE` after the daemon returned, and the next writer timed out. Bodies hold
        only store calls, so the deferral is bounded by the busy timeout.
        """
        with anyio.CancelScope(shield=True):
            async with AsyncSession(self.engine, expire_on_commit=False) as session, session.begin():
                yield session

    async def migrate(self) -> str:
        """Apply every pending Alembic migration; returns the head revision."""
        try:
            async with self.engine.begin() as conn:
                if self.dialect == "postgresql":
                    await conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
                return await conn.run_sync(_upgrade)
        except OSError as exc:
            raise StoreError(f"cannot reach the store at {_safe(self.url)}: {exc}") from None

    async def revision(self) -> str | None:
        """The revision the database is at (None before the first migration)."""
        from alembic.runtime.migration import MigrationContext

        async with self.engine.connect() as conn:
            return await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_revision())

    async def aclose(self) -> None:
        """Dispose of the connection pool."""
        await self.engine.dispose()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def alembic_config(connection: Any = None) -> Any:
    """An Alembic `Config` pointing at the bundled migrations (no alembic.ini needed)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _upgrade(sync_conn: Any) -> str:
    from alembic import command
    from alembic.script import ScriptDirectory

    cfg = alembic_config(sync_conn)
    command.upgrade(cfg, "head")
    head = ScriptDirectory.from_config(cfg).get_current_head()
    return head or ""


def _safe(url: str) -> str:
    scheme, _, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    return f"{scheme}://{creds.split(':', 1)[0]}@{host}" if at else url
