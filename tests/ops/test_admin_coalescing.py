"""`ops.admin_server.CoalescingTransport`: a response's head and body leave in one write, in order,
and nothing pending is lost on close."""

from __future__ import annotations

import asyncio


class RecordingTransport:
    """Stands in for an asyncio transport: records what is written and whether it was closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"extra:{name}"


def test_writes_of_one_turn_leave_as_one_in_order_and_close_sends_what_is_pending() -> None:
    from ops.admin_server import CoalescingTransport

    async def main() -> None:
        raw = RecordingTransport()
        transport = CoalescingTransport(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(memoryview(b"body"))
        assert raw.writes == []  # held until the end of this turn
        await asyncio.sleep(0)
        assert raw.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
        transport.write(b"second")
        transport.close()
        assert raw.writes[-1] == b"second" and raw.closed
        await asyncio.sleep(0)  # the scheduled flush finds nothing more to send
        assert len(raw.writes) == 2
        assert transport.get_extra_info("peername") == "extra:peername"  # the rest is the transport's

    asyncio.run(main())


def test_the_admin_api_answers_kept_alive_requests_whole() -> None:
    """Several GETs on one kept-alive connection through the real server: each answer complete."""
    import http.client
    import threading

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from arena.listen import listening_socket
    from ops.admin_server import CoalescingHttpToolsProtocol

    async def hello(_request: object) -> PlainTextResponse:
        return PlainTextResponse("x" * 5000)

    sock = listening_socket("127.0.0.1", 0)
    config = uvicorn.Config(
        Starlette(routes=[Route("/", hello)]), http=CoalescingHttpToolsProtocol, log_config=None
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if server.started:
                break
            threading.Event().wait(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", sock.getsockname()[1], timeout=10)
        for _ in range(3):
            conn.request("GET", "/")
            response = conn.getresponse()
            assert response.status == 200 and response.read() == b"x" * 5000
        conn.close()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
