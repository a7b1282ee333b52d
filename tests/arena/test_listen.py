"""`arena.listen.listening_socket`: the socket every Arena HTTP server is served on."""

from __future__ import annotations

import asyncio
import socket

import pytest

from arena.listen import listening_socket


def test_connections_accepted_on_it_have_nagle_off() -> None:
    """asyncio sets TCP_NODELAY on an accepted socket only when the listening socket's protocol
    says TCP; left on, answers on kept-alive connections waited for the client's delayed ACK."""

    async def main() -> list[int]:
        accepted: list[int] = []

        def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(
                writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            )
            writer.close()

        sock = listening_socket("127.0.0.1", 0)
        server = await asyncio.start_server(on_connect, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
            for _ in range(200):
                if accepted:
                    break
                await asyncio.sleep(0.01)
            writer.close()
        return accepted

    assert asyncio.run(main()) == [1]


def test_a_taken_address_is_an_error_naming_it() -> None:
    with listening_socket("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: "):
            listening_socket("127.0.0.1", port)
