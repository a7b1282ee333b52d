"""OpenAI-style error bodies for the model server (`simulate.serve` and its `serve_*` modules).

Every answer that is not a success is `{"error": {"message", "type", "param", "code"}}`, the shape
OpenAI's API and vLLM use, so clients (the official `openai` package raises typed exceptions from
it) show the server's message instead of a parse failure. `error_handlers()` extends that to
unknown routes (404), wrong methods (405) and unhandled exceptions (500).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import structlog
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

log = structlog.get_logger(__name__)


class WireError(ValueError):
    """A request the server refuses with a 400 (or `status`), naming the offending `param`."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param = param
        self.status = status

    def response(self) -> JSONResponse:
        """This error as an OpenAI-style response."""
        kind = "not_found_error" if self.status == 404 else "invalid_request_error"
        return error_response(self.status, str(self), kind=kind, param=self.param)


def error_response(
    status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None
) -> JSONResponse:
    """`{"error": {...}}` with `message` naming the problem, as OpenAI's API and vLLM answer."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": status}}, status_code=status
    )


def validation_message(exc: ValidationError) -> str:
    """The first few validation errors of a request body, each as `where: what`."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def check_model(requested: str | None, accepted: set[str], served: str) -> None:
    """`WireError` (404) unless the request names one of the served model names (or none)."""
    if requested is not None and requested not in accepted:
        raise WireError(
            f"model {requested!r} not found; this server serves {served!r}", param="model", status=404
        )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
        return error_response(404, message, kind="not_found_error")
    if exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
        return error_response(405, message)
    return error_response(exc.status_code, str(exc.detail))


async def _server_error(request: Request, exc: Exception) -> Response:
    # The traceback goes to the log; the client learns only that the server failed and where.
    log.error("serve.unhandled", path=request.url.path, error=repr(exc))
    return error_response(
        500, f"internal server error on {request.url.path}: {type(exc).__name__}", kind="server_error"
    )


Handler = Callable[[Request, Exception], Coroutine[Any, Any, Response]]


def error_handlers() -> dict[Any, Handler]:
    """Starlette exception handlers that answer every failure in OpenAI's error shape."""
    return {HTTPException: _http_error, Exception: _server_error}
