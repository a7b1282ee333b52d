"""Logging: JSON lines with `round` and `phase` on every line of a round; stdlib loggers routed."""

from __future__ import annotations

import io
import json
import logging
import os
import warnings
from collections.abc import Iterator

import pytest
import structlog

from ops.daemon import Daemon
from ops.logging import configure_logging

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """Undo configure_logging after each test (handlers, structlog, the warnings capture)."""
    yield
    logging.captureWarnings(False)
    logging.getLogger().handlers.clear()
    structlog.reset_defaults()


async def test_round_lines_carry_round_and_phase(make_config, fakes, run_daemon) -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    daemon = Daemon(make_config(), phases=fakes.fake_phases(steps=2), max_rounds=1, handle_signals=False)
    async with run_daemon(daemon):
        pass
    logging.getLogger("uvicorn.error").info("from the stdlib")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(r["event"] == "from the stdlib" and r["logger"] == "uvicorn.error" for r in lines)
    events = [r["event"] for r in lines]
    start, end = events.index("round.start"), events.index("round.completed")
    for record in lines[start : end + 1]:
        assert record.get("round") == 1, record
        if record["event"].startswith("phase."):
            assert record["phase"] in {"evaluate", "diagnose", "plan", "synthesize", "train", "publish"}
    assert all({"timestamp", "level", "logger"} <= set(r) for r in lines)


def test_library_output_becomes_log_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    bars = ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS")
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k not in bars})
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    logging.getLogger("uvicorn.error").info("Started", extra={"color_message": "\x1b[32mStarted\x1b[0m"})
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("`old` is deprecated", FutureWarning, stacklevel=1)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    started = next(r for r in lines if r["event"] == "Started")
    assert "color_message" not in started and "\x1b" not in stream.getvalue()
    assert any(r["logger"] == "py.warnings" and "FutureWarning" in r["event"] for r in lines)
    # Progress bars are not log lines: tqdm (read when first imported) and the Hub's are off.
    assert {os.environ[name] for name in bars} == {"1"}
