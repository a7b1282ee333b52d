"""OpenAI-style error bodies for the model server's endpoints (`simulate.serve`, `simulate.serve_reload`)."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.responses import JSONResponse


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
