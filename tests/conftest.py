"""Shared fixtures: the embedded model folder, a throw-away PostgreSQL database, a reloadable fake.

Fixtures owned by one package live in that package's own `tests/<package>/conftest.py`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# One model cache for the whole suite (and for `make run`): conversion from GGUF happens once.
MODEL_CACHE = Path(os.environ.get("ARENA_TEST_MODEL_CACHE", REPO_ROOT / "var" / "models"))
PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(autouse=True)
def _structlog_as_it_was() -> Iterator[None]:
    """Give every test the structlog configuration the one before it had.

    CLI commands configure structlog for their process (`quiet()` filters below warnings); in the
    test process that would outlive the test, and later tests' `capture_logs` would see no info
    events at all (the filtering wrapper drops them before any processor runs).
    """
    import structlog

    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """A safetensors folder of the embedded SmolLM2-135M-Instruct (converted once, then cached)."""
    from simulate.embedded import ensure_embedded_model

    return ensure_embedded_model(MODEL_CACHE)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session; yields its async SQLAlchemy URL.

    PostgreSQL is a real part of the production store path, so its absence fails the test
    rather than skipping it.
    """
    import psycopg

    name = f"arena_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class ScriptedReloadableChatModel:
    """Scripted stand-in for a served policy with reloadable weights (no model): answers every chat
    with a fixed text and records the weight folders it loads and the cache resets it gets."""

    name = "scripted-reloadable"

    def __init__(self) -> None:
        self.loaded: list[Path] = []
        self.resets = 0

    async def chat(self, messages: object, **kwargs: object) -> object:
        from arena.types import Completion

        return Completion(text="hello", completion_token_ids=[1, 2], prompt_token_ids=[3])

    def load_weights(self, path: str | Path) -> None:
        from arena.protocols import ModelError

        if not (Path(path) / "model.safetensors").is_file():
            raise ModelError(f"no safetensors weights at {path}")
        self.loaded.append(Path(path))

    def weights_changed(self) -> None:
        self.resets += 1


@pytest.fixture
def reloadable_model() -> ScriptedReloadableChatModel:
    """A scripted fake policy whose weights the serving app's reload endpoints can load."""
    return ScriptedReloadableChatModel()
