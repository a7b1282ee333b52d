"""The listening TCP socket every Arena HTTP server is served on (the MCP server, the model server,
the admin API), bound by the caller so that a taken address is a clear error before serving.

Why one helper: the protocol must be named `IPPROTO_TCP`. asyncio turns Nagle's algorithm off
(`TCP_NODELAY`) only on accepted sockets whose protocol says TCP; on a socket made with protocol
0 it stays on, and every answer on a kept-alive connection (the policy's model calls, MCP tool
calls, Prometheus scrapes) waited ~40 ms for the client's delayed ACK between uvicorn's header and
body writes.
"""

from __future__ import annotations

import socket


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port` (port 0 picks a free one). Raises `OSError` naming the
    address when it cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise OSError(exc.errno, f"cannot listen on {address}: {exc.strerror}") from None
    sock.listen(128)
    return sock
