"""The admin HTTP API: Starlette served by uvicorn inside the daemon's task group.

GET  /healthz  the process is alive (always 200 while it serves)
GET  /readyz   200 when the store is migrated and the model backends answer, else 503
GET  /status   JSON: round, phase, paused, progress, last pass rates, curriculum summary
GET  /metrics  Prometheus text format
POST /pause    {"reason": "..."} optional; persisted, takes effect at the next safe point
POST /resume
POST /stop     drain and exit

POST endpoints need `Authorization: Bearer <token>` when a token is configured; without a token the
daemon only listens on a loopback address (`check_exposure`).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import socket
from typing import TYPE_CHECKING, Any

import structlog
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ops.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from ops.config_sections import AdminConfig
    from ops.daemon import Daemon

log = structlog.get_logger(__name__)


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


def build_app(daemon: Daemon, token: str | None) -> Starlette:
    """The admin application for `daemon`."""

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
            who = actor(request)
            if action == "pause":
                changed = await daemon.pause(who, reason)
            elif action == "resume":
                changed = await daemon.resume(who)
            else:
                await daemon.stop(who)
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

    async def status(_: Request) -> Response:
        return JSONResponse(await daemon.status())

    async def metrics(_: Request) -> Response:
        return Response(daemon.metrics.exposition(), media_type=CONTENT_TYPE)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/status", status),
            Route("/metrics", metrics),
            Route("/pause", guarded("pause"), methods=["POST"]),
            Route("/resume", guarded("resume"), methods=["POST"]),
            Route("/stop", guarded("stop"), methods=["POST"]),
        ]
    )


class _Server(uvicorn.Server):
    # The daemon owns SIGTERM/SIGINT; uvicorn must not install (and later re-raise) its own handlers.
    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await self._serve(sockets)


class AdminServer:
    """uvicorn on a socket the daemon binds itself (so a busy port is a clear error)."""

    def __init__(self, daemon: Daemon, admin: AdminConfig) -> None:
        token = admin.token.get_secret_value() if admin.token is not None else None
        self.admin = admin
        self.app = build_app(daemon, token)
        self.sock: socket.socket | None = None
        self.server: _Server | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return self.sock.getsockname()[1] if self.sock is not None else self.admin.port

    def bind(self) -> None:
        """Bind and listen; raises `OSError` naming the address when it is taken."""
        host = self.admin.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, self.admin.port))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"cannot listen on {self.admin.address}: {exc.strerror}") from None
        sock.listen(128)
        sock.setblocking(False)
        self.sock = sock

    async def serve(self) -> None:
        """Serve until `shutdown()`."""
        config = uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="off")
        self.server = _Server(config)
        assert self.sock is not None
        log.info("admin.listening", address=f"{self.admin.host}:{self.port}")
        await self.server.serve(sockets=[self.sock])

    def shutdown(self) -> None:
        """Ask uvicorn to finish (it closes the socket)."""
        if self.server is not None:
            self.server.should_exit = True
        elif self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
