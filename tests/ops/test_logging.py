"""Logging: JSON lines with `round` and `phase` on every line of a round; stdlib loggers routed."""

from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from ops.daemon import Daemon
from ops.logging import configure_logging

pytestmark = pytest.mark.anyio


async def test_round_lines_carry_round_and_phase(make_config, fakes, run_daemon) -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    try:
        daemon = Daemon(make_config(), phases=fakes.fake_phases(steps=2), max_rounds=1, handle_signals=False)
        async with run_daemon(daemon):
            pass
        logging.getLogger("uvicorn.error").info("from the stdlib")
    finally:
        logging.getLogger().handlers.clear()
        structlog.reset_defaults()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(r["event"] == "from the stdlib" and r["logger"] == "uvicorn.error" for r in lines)
    events = [r["event"] for r in lines]
    start, end = events.index("round.start"), events.index("round.completed")
    for record in lines[start : end + 1]:
        assert record.get("round") == 1, record
        if record["event"].startswith("phase."):
            assert record["phase"] in {"evaluate", "diagnose", "plan", "synthesize", "train", "publish"}
    assert all({"timestamp", "level", "logger"} <= set(r) for r in lines)
