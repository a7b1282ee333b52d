"""Fixtures of the model backends: one real local model loaded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def local_model(embedded_model_path: Path):  # -> simulate.local.LocalChatModel
    """The embedded SmolLM2-135M-Instruct behind the batching local backend (CPU, loaded once).

    Shared by every test in the session: do not swap its weights (load your own for that).
    """
    from simulate.local import LocalChatModel

    return LocalChatModel.load(embedded_model_path, device="cpu", max_batch=16)


@pytest.fixture
def anyio_backend() -> str:
    """Model backends run on asyncio (uvicorn and httpx need it)."""
    return "asyncio"
