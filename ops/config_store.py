"""The `[store]` section: where the store is and how many rounds of each growing table it keeps."""

from __future__ import annotations

from pydantic import Field, field_validator

from ops.config_sections import ConfigSection


class StoreConfig(ConfigSection):
    """The arena store (SQLite by default, PostgreSQL in production)."""

    url: str | None = Field(
        None, description="SQLAlchemy async URL (ARENA_DATABASE_URL); default sqlite in the data dir."
    )
    busy_timeout_s: float = Field(30.0, gt=0, description="SQLite busy timeout.")
    pool_size: int = Field(5, ge=1, le=100, description="Connection pool size (PostgreSQL).")
    migrate_on_start: bool = Field(True, description="Apply Alembic migrations when the daemon starts.")
    keep_transcript_rounds: int | None = Field(
        20,
        ge=1,
        description="Rounds whose episode transcripts stay in the store; older ones are emptied after "
        "each round (rewards and verdicts stay). None keeps every transcript.",
    )
    keep_episode_rounds: int | None = Field(
        50,
        ge=1,
        description="Rounds whose episodes stay in the store; older ones are deleted between rounds "
        "(round summaries, phase outputs and the curriculum's history stay). None keeps every episode.",
    )
    keep_task_rounds: int | None = Field(
        50,
        ge=1,
        description="Rounds whose fresh tasks stay in the store; older ones no stored episode refers to "
        "are deleted between rounds (the yardstick's tasks always stay). None keeps every task.",
    )
    keep_event_rounds: int | None = Field(
        200,
        ge=1,
        description="Rounds of audit-log events kept: events from before the oldest kept round's start "
        "are deleted between rounds (the transcript-pruning watermark stays). None keeps every event.",
    )
    keep_yardstick_rounds: int | None = Field(
        None,
        ge=1,
        description="Rounds whose yardstick and public-yardstick runs stay (the first measured round "
        "always stays, for the change since round 1). None keeps every run: arena report's full history.",
    )
    keep_record_rounds: int | None = Field(
        None,
        ge=1,
        description="Rounds whose records stay: the round, its phases' outputs and times, its diagnosis "
        "and its checkpoints' lineage (the live policy's always stays); older ones are deleted between "
        "rounds, and events go with them. None keeps every record: arena report's full history.",
    )

    @field_validator("url")
    @classmethod
    def _async_driver(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith(("postgresql://", "postgres://")):
            # Operators paste libpq URLs; the store needs the async driver.
            return "postgresql+asyncpg://" + value.split("://", 1)[1]
        if value.startswith("sqlite://"):
            return "sqlite+aiosqlite://" + value.split("://", 1)[1]
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must be a sqlite+aiosqlite:// or postgresql+asyncpg:// URL")
        return value
