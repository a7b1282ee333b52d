"""The soak's admin-load client: fixed GETs on kept-alive connections, a connection the server
closed is replaced (not an error), a non-200 answer is one."""

from __future__ import annotations

import asyncio

import pytest

from ops.admin_load_client import PATHS, Scraper


async def _serve(status: int, close_after: bool) -> tuple[asyncio.Server, list[str]]:
    seen: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                seen.append(head.split(b" ")[1].decode())
                body = b'{"ok":true}'
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
                if close_after:  # as a server closing an idle kept-alive connection does
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0), seen


@pytest.mark.parametrize("close_after", [False, True])
def test_every_request_is_answered_and_closed_connections_are_replaced(close_after: bool) -> None:
    async def main() -> None:
        server, seen = await _serve(200, close_after)
        async with server:
            port = server.sockets[0].getsockname()[1]
            result = await Scraper(f"http://127.0.0.1:{port}", rate=100, seconds=0.2).run()
        assert [len(result.latencies_ms[p]) for p in PATHS] == [10, 10]
        assert result.errors == dict.fromkeys(PATHS, 0) and result.dropped == dict.fromkeys(PATHS, 0)
        assert sorted(seen) == sorted(list(PATHS) * 10)
        assert result.window is not None and result.window[1] >= result.window[0] and result.cpu_seconds > 0

    asyncio.run(main())


def test_answers_other_than_200_are_errors() -> None:
    async def main() -> None:
        failing, _ = await _serve(500, close_after=False)
        async with failing:
            port = failing.sockets[0].getsockname()[1]
            result = await Scraper(f"http://127.0.0.1:{port}", rate=100, seconds=0.2).run()
        assert result.errors == dict.fromkeys(PATHS, 10)

    asyncio.run(main())


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="positive rate"):
        Scraper("http://127.0.0.1:1", rate=0, seconds=1)
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        Scraper("127.0.0.1:9000", rate=1, seconds=1)
