"""structlog set-up: JSON lines in production, a readable console on a terminal.

Everything goes through one stdlib handler with structlog's `ProcessorFormatter`, so library
loggers (uvicorn, httpx, transformers, alembic) come out in the same format as Arena's own lines.
`round` and `phase` are bound with `structlog.contextvars` by the daemon; anyio tasks copy the
context when spawned, so every line logged during a round carries them.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Literal, TextIO

import structlog

LIBRARY_LOGGERS = (
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "httpx",
    "httpcore",
    "transformers",
    "alembic",
    "py.warnings",
)
# Whether progress bars are off (JSON output): route_library_logs applies it to transformers too.
_bars_off = False


class _CurrentStdout(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stdout` is now (rich's live display swaps it while a bar is shown)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self._fixed = stream

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return self._fixed or sys.stdout

    @stream.setter
    def stream(self, value: TextIO) -> None:  # StreamHandler.__init__ assigns it; keep it dynamic
        pass


def _use_console(fmt: str, stream: TextIO | None) -> bool:
    if fmt == "console":
        return True
    if fmt == "json":
        return False
    out = stream or sys.stdout
    return bool(getattr(out, "isatty", lambda: False)())


def configure_logging(
    level: str = "info",
    fmt: Literal["auto", "json", "console"] = "auto",
    stream: TextIO | None = None,
) -> None:
    """Configure structlog and the stdlib root logger (idempotent)."""
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.stdlib.ExtraAdder(),
        _drop_color_message,
    ]
    renderer: Any
    if _use_console(fmt, stream):
        renderer = structlog.dev.ConsoleRenderer(colors=True)
    else:
        renderer = structlog.processors.JSONRenderer()
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    handler = _CurrentStdout(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = logging.getLevelName(level.upper())
    root.setLevel(numeric)
    # Library warnings (transformers' FutureWarnings) become log lines instead of raw stderr text.
    # Off first: `captureWarnings(True)` does nothing while it believes capture is on, even after
    # something else (a `warnings.catch_warnings` block) put its own `showwarning` back.
    logging.captureWarnings(False)
    logging.captureWarnings(True)
    global _bars_off
    _bars_off = not _use_console(fmt, stream)
    if _bars_off:
        _disable_progress_bars()
    for name in LIBRARY_LOGGERS:
        lib = logging.getLogger(name)
        lib.handlers.clear()
        lib.propagate = True
        lib.setLevel(logging.NOTSET)  # a level an embedded server set earlier must not outlive this
    # httpx logs every request at INFO; that is noise for a daemon polling its model server.
    logging.getLogger("httpx").setLevel(max(numeric, logging.WARNING))
    logging.getLogger("uvicorn.access").setLevel(max(numeric, logging.WARNING))
    logging.getLogger("alembic").setLevel(max(numeric, logging.WARNING))
    route_library_logs()
    structlog.configure(
        processors=[
            *shared[:1],
            structlog.stdlib.filter_by_level,
            *shared[1:],
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def route_library_logs() -> None:
    """Send transformers' logs through structlog (call again after a library is first imported)."""
    # transformers installs its own stderr handler and stops propagation on first use; undo that.
    mod = sys.modules.get("transformers.utils.logging")
    if mod is not None:
        mod.disable_default_handler()
        mod.enable_propagation()
        if _bars_off:
            mod.disable_progress_bar()


def _disable_progress_bars() -> None:
    """Progress bars are not log lines: keep them out of JSON output (a journal, a pod's log).

    tqdm reads `TQDM_*` variables once, when it is first imported (the daemon imports it only when
    a phase loads a model, after logging is configured), which also covers bars that libraries draw
    with tqdm directly (transformers' GGUF conversion). An operator's own setting wins.
    """
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _drop_color_message(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    # uvicorn passes a copy of its message with ANSI colours as `extra`; the plain one is enough.
    event.pop("color_message", None)
    return event
