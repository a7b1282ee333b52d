"""The arena store: sqlmodel tables, an async engine (SQLite or PostgreSQL), Alembic migrations,
a repository of small typed async functions and integrity checks.

    store = Store("sqlite+aiosqlite:///var/arena.db")
    await store.migrate()
    async with store.transaction() as s:
        await repo.upsert_episode(s, EpisodeRow(...))
"""

from arena.store import public_runs, repo, repo_yardstick
from arena.store.engine import Store, StoreError, make_engine
from arena.store.fidelity import HelperFidelityRow, latest_fidelity, save_fidelity
from arena.store.integrity import IntegrityReport, check_integrity
from arena.store.public_runs import PublicRunRow
from arena.store.tables import (
    PHASES,
    CheckpointRow,
    CurriculumStateRow,
    DaemonStateRow,
    DiagnosisReportRow,
    EnvironmentRow,
    EpisodeRow,
    EventRow,
    JsonText,
    PhaseRow,
    RoundRow,
    TaskRow,
    YardstickRunRow,
    YardstickTaskRow,
)

__all__ = [
    "PHASES",
    "CheckpointRow",
    "CurriculumStateRow",
    "DaemonStateRow",
    "DiagnosisReportRow",
    "EnvironmentRow",
    "EpisodeRow",
    "EventRow",
    "HelperFidelityRow",
    "IntegrityReport",
    "JsonText",
    "PhaseRow",
    "PublicRunRow",
    "RoundRow",
    "Store",
    "StoreError",
    "TaskRow",
    "YardstickRunRow",
    "YardstickTaskRow",
    "check_integrity",
    "latest_fidelity",
    "make_engine",
    "public_runs",
    "repo",
    "repo_yardstick",
    "save_fidelity",
]
