"""The admin HTTP API: a Starlette application, served by `ops.admin_server` on its own thread.

GET  /healthz  the process is alive (always 200 while it serves)
GET  /readyz   200 when the store is migrated and the model backends answer, else 503
GET  /status   JSON: round, phase, paused, progress, last pass rates, curriculum summary
GET  /metrics  Prometheus text format
POST /pause    {"reason": "..."} optional; persisted, takes effect at the next safe point
POST /resume
POST /stop     drain and exit

The GETs run on the admin thread's event loop and never wait for the daemon's: /status serves the
snapshot the daemon keeps (`ops.status.StatusSnapshot`), /metrics an exposition rendered at most
once per `METRICS_MAX_AGE_S`. The POSTs act on the daemon, so they run its coroutines on its loop
(`on_daemon`) and answer once that is done.

POST endpoints need `Authorization: Bearer <token>` when a token is configured; without a token the
daemon only listens on a loopback address (`check_exposure`). One that arrives while the daemon starts
waits for its store (migrated, state read) up to `READY_WAIT_S`, then answers 503 with `Retry-After`.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ops.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from ops.config_sections import AdminConfig
    from ops.daemon_view import Controlled

# Prometheus scrapes every 15 s: a second-old exposition costs no freshness, and a burst of
# scrapes renders it once instead of once per request.
METRICS_MAX_AGE_S = 1.0

# A POST that arrives while the daemon starts waits this long for its store before a 503.
READY_WAIT_S = 30.0

OnDaemon = Callable[..., Awaitable[Any]]
"""`await on_daemon(fn, *args)`: run the coroutine function `fn(*args)` on the daemon's loop."""


async def _until_ready(daemon: Controlled, limit_s: float) -> bool:
    """Whether the daemon is ready, waiting up to `limit_s` for it (polled: it lives on another loop)."""
    deadline = time.monotonic() + limit_s
    while not daemon.ready:
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(0.05)
    return True


class AdminExposureError(ValueError):
    """The admin API would be reachable from other machines without a token."""


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts local connections."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: cannot prove it is local


def check_exposure(admin: AdminConfig) -> None:
    """Refuse a non-loopback admin address without a token (clear message, no traceback)."""
    if admin.token is None and not is_loopback(admin.host):
        raise AdminExposureError(
            f"refusing to serve the admin API on {admin.address} without a token: set ARENA_ADMIN_TOKEN "
            "(or admin.token) or bind to 127.0.0.1"
        )


class SharedExposition:
    """The Prometheus exposition, rendered at most once per `max_age_s` and shared by the requests
    in that window. Used from the admin thread's loop only, so it needs no lock."""

    def __init__(self, render: Callable[[], bytes], max_age_s: float = METRICS_MAX_AGE_S) -> None:
        self.render, self.max_age_s = render, max_age_s
        self._body = b""
        self._at: float | None = None

    def body(self) -> bytes:
        """The exposition, rendered now if the last one is older than `max_age_s`."""
        now = time.monotonic()
        if self._at is None or now - self._at >= self.max_age_s:
            self._body, self._at = self.render(), now
        return self._body


class ScrapePath:
    """An ASGI application: the scraped GETs (`/metrics`, `/status`) answered straight from their
    bytes, everything else passed to `app`.

    Why: at the 200 requests a second a soak scrapes at, Starlette's request, routing and response
    objects were most of each request's Python, run on a thread that shares the interpreter lock
    with the rounds (`docs/soak.md`). Same status, headers and bodies as the routes they skip.
    """

    def __init__(self, app: Starlette, bodies: dict[str, Callable[[], tuple[bytes, bytes]]]) -> None:
        self.app, self.bodies = app, bodies

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve a scraped GET, or hand the request to the full application."""
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] in self.bodies:
            body, media_type = self.bodies[scope["path"]]()
            headers = [(b"content-type", media_type), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
            return
        await self.app(scope, receive, send)


def build_app(
    daemon: Controlled, token: str | None, on_daemon: OnDaemon, *, ready_wait_s: float = READY_WAIT_S
) -> ScrapePath:
    """The admin application for `daemon`; `on_daemon` carries the POSTs to the daemon's loop."""
    exposition = SharedExposition(daemon.metrics.exposition)

    def authorized(request: Request) -> bool:
        if token is None:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())

    async def reason_of(request: Request) -> str:
        body = await request.body()
        if not body.strip():
            return ""
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ValueError(f"body is not JSON: {exc.msg}") from None
        if not isinstance(data, dict) or not isinstance(data.get("reason", ""), str):
            raise ValueError('body must be a JSON object like {"reason": "..."}')
        return data.get("reason", "")

    def actor(request: Request) -> str:
        client = request.client.host if request.client else "unknown"
        return f"admin@{client}"

    def guarded(action: str) -> Any:
        async def endpoint(request: Request) -> Response:
            if not authorized(request):
                daemon.metrics.errors.labels(component="admin").inc()
                return JSONResponse(
                    {"error": "missing or wrong bearer token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            try:
                reason = await reason_of(request)
            except ValueError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            if not await _until_ready(daemon, ready_wait_s):
                # The API serves from the first moment, before the store is migrated: a pause
                # written then would fail on a missing table, or be read over by the start-up.
                return JSONResponse(
                    {"error": f"the daemon is starting (store not ready): retry the {action}"},
                    status_code=503,
                    headers={"Retry-After": "1"},
                )
            who = actor(request)
            if action == "pause":
                changed = await on_daemon(daemon.pause, who, reason)
            elif action == "resume":
                changed = await on_daemon(daemon.resume, who)
            else:
                await on_daemon(daemon.stop, who)
                changed = True
            daemon.metrics.admin_actions.labels(action=action).inc()
            return JSONResponse({"ok": True, "action": action, "changed": changed, "paused": daemon.paused})

        return endpoint

    async def healthz(_: Request) -> Response:
        return JSONResponse({"ok": True})

    async def readyz(_: Request) -> Response:
        ready = daemon.ready and daemon.models_up
        body = {"ready": ready, "store": daemon.ready, "models": daemon.models_up, "sandbox": daemon.sandbox}
        return JSONResponse(body, status_code=200 if ready else 503)

    def status_body() -> tuple[bytes, bytes]:
        document = daemon.status_snapshot.document(daemon)
        # As Starlette's JSONResponse renders it.
        body = json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return body.encode(), b"application/json"

    def metrics_body() -> tuple[bytes, bytes]:
        return exposition.body(), CONTENT_TYPE.encode()

    app = Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/pause", guarded("pause"), methods=["POST"]),
            Route("/resume", guarded("resume"), methods=["POST"]),
            Route("/stop", guarded("stop"), methods=["POST"]),
        ]
    )
    return ScrapePath(app, {"/status": status_body, "/metrics": metrics_body})
