"""Serving the admin API (`ops.admin`): uvicorn on a thread of its own, with its own event loop.

Why a thread: on the daemon's loop a scrape waited for the round's work (a phase that holds the
loop, a store query) and the round waited for the scrapes; at 200 requests a second the API
answered about 46 and the rounds ran several times slower (docs/soak.md). On its own loop the API
answers while the daemon's loop is busy, and its GETs read only what the daemon publishes
(`ops.status.StatusSnapshot`, the metrics registry), never the store or the daemon's loop. The
POSTs do act on the daemon: they run on its loop, captured in `start` (`on_daemon`).

Each answer leaves in one segment (`CoalescingHttpToolsProtocol`): uvicorn writes a response's
head and body separately, two `send` calls a request, which on the 200 scrapes a second of a soak
were most of the admin thread's CPU (4.9 of 6.4 s, on the two cores the rounds run on).

The daemon binds the socket itself, on its own loop before serving, so a busy port is a clear
error at start-up; the thread starts before the daemon's start-up work, so /healthz answers
during it; `aclose` stops uvicorn and joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import structlog
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from arena.listen import listening_socket
from ops.admin import build_app

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ops.config_sections import AdminConfig
    from ops.daemon_view import Controlled

log = structlog.get_logger(__name__)

THREAD_NAME = "arena-admin"
# uvicorn lets requests in flight finish for this long when the daemon stops; the join waits a
# little longer (uvicorn notices `should_exit` within 0.1 s).
GRACEFUL_SHUTDOWN_S = 5
JOIN_TIMEOUT_S = GRACEFUL_SHUTDOWN_S + 5
# How long a thread holding the interpreter lock runs before one waiting for it gets it (Python's
# default is 5 ms). At 5 ms a scrape waited up to 5 ms at each of its steps on the admin loop
# whenever the rounds ran Python, and the rounds slowed more under load (docs/soak.md: 200
# requests/s, p99 53 ms and rounds +16% at 5 ms; p99 49 ms and +12% at 0.5 ms).
GIL_SWITCH_INTERVAL_S = 0.0005


class CoalescingTransport:
    """A transport whose writes in one turn of the event loop leave in one `send`.

    uvicorn writes a response's head and then its body; on a socket with Nagle's algorithm off
    (`arena.listen`) each write is a syscall and a segment of its own. Writes are joined and sent
    at the end of the loop's turn (`call_soon`), in order; `close` sends what is pending first.
    Everything else is the wrapped transport's.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue `data`; the first write of a turn schedules the flush."""
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def _flush(self) -> None:
        if self._pending:
            data, self._pending = b"".join(self._pending), []
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        """Send what is pending, then close."""
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a `CoalescingTransport`: one segment an answer."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Wrap the connection's transport before uvicorn keeps it."""
        wrapped = CoalescingTransport(transport, asyncio.get_running_loop())
        super().connection_made(wrapped)  # type: ignore[arg-type]


class _Server(uvicorn.Server):
    # The daemon owns SIGTERM/SIGINT; uvicorn must not install (and later re-raise) its own handlers.
    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await self._serve(sockets)


class AdminServer:
    """uvicorn on a socket the daemon binds itself (so a busy port is a clear error), on a thread."""

    def __init__(self, daemon: Controlled, admin: AdminConfig) -> None:
        token = admin.token.get_secret_value() if admin.token is not None else None
        self.admin = admin
        self.app = build_app(daemon, token, self.on_daemon)
        self.sock: socket.socket | None = None
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None
        self._daemon_loop: asyncio.AbstractEventLoop | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return self.sock.getsockname()[1] if self.sock is not None else self.admin.port

    def bind(self) -> None:
        """Bind and listen; raises `OSError` naming the address when it is taken."""
        sock = listening_socket(self.admin.host, self.admin.port)
        sock.setblocking(False)
        self.sock = sock

    def start(self) -> None:
        """Serve on the admin thread until `aclose()`. Call it on the daemon's loop: the POSTs
        run on that loop."""
        assert self.sock is not None, "bind() first"
        # The daemon runs on asyncio (anyio's default backend, which every `anyio.run` here uses).
        self._daemon_loop = asyncio.get_running_loop()
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_INTERVAL_S))
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            http=CoalescingHttpToolsProtocol,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        self.server = _Server(config)
        self.thread = threading.Thread(target=self._serve, name=THREAD_NAME, daemon=True)
        self.thread.start()
        log.info("admin.listening", address=f"{self.admin.host}:{self.port}")

    def _serve(self) -> None:
        assert self.server is not None and self.sock is not None
        try:
            asyncio.run(self.server.serve(sockets=[self.sock]))
        except Exception as exc:  # the daemon goes on without its API; say so loudly
            log.error("admin.failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)

    async def on_daemon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run `fn(*args)` on the daemon's loop and await its result on the admin thread's loop;
        neither loop blocks the other, so GETs keep answering while a POST waits.

        No thread waits on the daemon's loop (`anyio.from_thread.run` would block one): were the
        daemon's loop gone, such a thread would hang the interpreter's exit.
        """
        assert self._daemon_loop is not None
        future = asyncio.run_coroutine_threadsafe(fn(*args), self._daemon_loop)
        return await asyncio.wrap_future(future)

    async def aclose(self) -> None:
        """Stop uvicorn (requests in flight get `GRACEFUL_SHUTDOWN_S`), join the thread, close the
        socket. Runs on the daemon's loop, which stays free meanwhile: a POST in flight still
        reaches it."""
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            await anyio.to_thread.run_sync(self.thread.join, JOIN_TIMEOUT_S)
            if self.thread.is_alive():
                log.warning("admin.thread_still_running", waited_s=JOIN_TIMEOUT_S)
        if self.sock is not None:  # uvicorn closes it; not if it stopped before it served
            with contextlib.suppress(OSError):
                self.sock.close()
