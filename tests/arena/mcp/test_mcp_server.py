"""`arena mcp`: a real MCP server, exercised through the real `mcp` client.

In-process for the tool listing, as a subprocess over stdio, and as a subprocess over streamable
HTTP, with one environment instance per session (a write in one session is invisible in another).
The environment is a small fixture folder passed with `--env-path`.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from arena.env.loader import load_environment
from arena.mcp.server import ServedEnvironment, build_server
from ops.cli import main as cli_main

FIXTURE = Path(__file__).parent / "fixtures" / "notes"
ARENA = str(Path(sys.executable).parent / "arena")


def text(result: Any) -> str:
    return result.content[0].text


def stdio_params(env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=ARENA, args=["mcp", "mcp_notes", "--env-path", str(FIXTURE)], env=env
    )


@asynccontextmanager
async def http_server() -> AsyncIterator[tuple[str, anyio.abc.Process]]:
    """`arena mcp --http 127.0.0.1:0` as a subprocess; yields its URL (announced on stderr)."""
    proc = await anyio.open_process(
        [ARENA, "mcp", "mcp_notes", "--env-path", str(FIXTURE), "--http", "127.0.0.1:0"]
    )
    try:
        assert proc.stderr is not None
        seen = b""
        with anyio.fail_after(60):
            while b"/mcp" not in seen:
                seen += await proc.stderr.receive()
        url = re.search(rb"(http://127\.0\.0\.1:\d+/mcp)", seen)
        assert url, seen
        yield url.group(1).decode(), proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        with anyio.fail_after(30):
            await proc.wait()


def test_in_process_tool_listing_errors_and_no_verification() -> None:
    env = load_environment(FIXTURE)
    server, _ = build_server(ServedEnvironment.from_environment(env), scope="process")

    async def main() -> None:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"list_notes", "get_note", "add_note"}
            assert tools["get_note"].input_schema["required"] == ["note_id"]
            assert tools["get_note"].input_schema["properties"]["note_id"]["type"] == "string"
            assert tools["add_note"].annotations.read_only_hint is False
            assert tools["list_notes"].annotations.read_only_hint is True
            # A tool's refusal and bad arguments are tool results with isError; the agent reads them.
            refused = await client.call_tool("get_note", {"note_id": "N-2"})
            assert refused.is_error and text(refused) == "no note N-2"
            invalid = await client.call_tool("get_note", {"note_id": 5, "extra": 1})
            assert invalid.is_error and "invalid arguments" in text(invalid)
            ok = await client.call_tool("get_note", {"note_id": "N-1"})
            assert not ok.is_error and ok.structured_content["title"] == "Groceries"
            # A tool that does not exist is a protocol error.
            with pytest.raises(MCPError, match="unknown tool 'check_task'"):
                await client.call_tool("check_task", {})
            # Nothing but tools: no resources or prompts through which checks could leak.
            for call in (client.list_resources, client.list_prompts):
                with pytest.raises(MCPError):
                    await call()

    anyio.run(main)


def test_stdio_each_process_is_one_isolated_session() -> None:
    async def main() -> None:
        async with Client(stdio_params()) as a, Client(stdio_params()) as b:
            added = await a.call_tool("add_note", {"title": "Only in A"})
            assert not added.is_error and added.structured_content == {
                "note_id": "N-N0001",
                "title": "Only in A",
            }
            assert "Only in A" in text(await a.call_tool("list_notes", {}))
            assert "Only in A" not in text(await b.call_tool("list_notes", {}))
            failed = await b.call_tool("add_note", {"title": " "})
            assert failed.is_error and text(failed) == "a note needs a title"

    anyio.run(main)


def test_stdio_with_every_tool_in_the_sandbox() -> None:
    async def main() -> None:
        async with Client(stdio_params({**os.environ, "ARENA_SANDBOX": "all"})) as client:
            added = await client.call_tool("add_note", {"title": "Sandboxed"})
            assert added.structured_content == {"note_id": "N-N0001", "title": "Sandboxed"}
            assert "Sandboxed" in text(await client.call_tool("list_notes", {}))
            refused = await client.call_tool("get_note", {"note_id": "N-2"})
            assert refused.is_error and text(refused) == "no note N-2"

    anyio.run(main)


def test_http_sessions_are_isolated_and_sigterm_exits_cleanly() -> None:
    async def main() -> None:
        async with http_server() as (url, proc):
            async with Client(url) as a, Client(url) as b:
                assert not (await a.call_tool("add_note", {"title": "A's note"})).is_error
                assert "A's note" in text(await a.call_tool("list_notes", {}))
                assert "A's note" not in text(await b.call_tool("list_notes", {}))
                # Ids are per session too: B's first new note gets the same id as A's.
                b_added = await b.call_tool("add_note", {"title": "B's note"})
                assert b_added.structured_content["note_id"] == "N-N0001"
                refused = await b.call_tool("get_note", {"note_id": "N-404"})
                assert refused.is_error and text(refused) == "no note N-404"
            # A new session starts again from the seed state.
            async with Client(url) as c:
                listing = text(await c.call_tool("list_notes", {}))
                assert "A's note" not in listing and "B's note" not in listing
            # A session-less (2026 protocol) client is refused clearly rather than given a fresh
            # database per call.
            with pytest.raises(BaseException) as info:
                async with Client(url, mode="2026-07-28") as modern:
                    await modern.call_tool("list_notes", {})
            assert "one environment per MCP session" in repr(info.value)
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                assert await proc.wait() == 0

    anyio.run(main)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["mcp", "no_such_env"], "unknown environment 'no_such_env'"),
        (["mcp", "mcp_notes", "--http", "localhost"], "--http wants HOST:PORT"),
        (["mcp", "mcp_notes", "--http", "127.0.0.1:99999"], "--http wants HOST:PORT"),
        (["mcp", "mcp_notes", "--env-path", "/no/such/dir"], "does not exist"),
    ],
)
def test_cli_errors_are_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if "--env-path" not in argv:
        argv = [*argv, "--env-path", str(FIXTURE)]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
