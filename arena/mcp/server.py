"""Serve one Arena environment as a real MCP server (stdio or streamable HTTP).

Each MCP session gets its own environment instance (a fresh copy of the database), created on the
session's first tool call and released when the session ends; a write in one session is never
visible in another. Tools are listed with their JSON schemas; a tool's failure comes back as a
tool result with `isError` (the agent can read and correct it), a call to a tool that does not
exist as an MCP error. Verification (checks, reference solutions) is never reachable: the server
only knows the tools.

Sessions: over stdio one process serves one client, so the process holds one instance (any
protocol era). Over HTTP a session is the 2025 handshake's `Mcp-Session-Id`; the 2026 protocol has
no sessions, so the HTTP server declines `server/discover` — clients then fall back to the
handshake — and refuses session-less tool calls with a clear error rather than silently giving
every call a fresh database.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
from collections.abc import Callable, Iterator
from typing import Any, Literal

import anyio
import mcp_types as types
import structlog
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from arena.env.instance import EnvInstance
from arena.types import ToolSpec

log = structlog.get_logger(__name__)

SessionScope = Literal["process", "session"]
_STATE_KEY = "arena.instance"


class ServedEnvironment:
    """What the server needs: a name, the tools, which ones write, and a way to make instances."""

    def __init__(
        self,
        name: str,
        tool_specs: list[ToolSpec],
        new_instance: Callable[[], EnvInstance],
        *,
        title: str = "",
        description: str = "",
        write_tools: list[str] | None = None,
        version: str = "",
    ) -> None:
        self.name = name
        self.tool_specs = list(tool_specs)
        self.new_instance = new_instance
        self.title = title
        self.description = description
        self.write_tools = set(write_tools or [])
        self.version = version

    @classmethod
    def from_environment(cls, env: Any, **instance_kwargs: Any) -> ServedEnvironment:
        """From a loaded executable `arena.env.runtime.Environment`."""
        return cls(
            env.name,
            env.tool_specs,
            lambda: env.new_instance(**instance_kwargs),
            title=env.title,
            description=env.description,
            write_tools=list(env.write_tools),
            version=env.version,
        )


def mcp_tool(spec: ToolSpec, *, writes: bool) -> types.Tool:
    """The MCP tool entry of an Arena tool: its JSON schema and read/write hints."""
    schema = dict(spec.parameters)
    schema.setdefault("type", "object")
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=schema,
        annotations=types.ToolAnnotations(read_only_hint=not writes, open_world_hint=False),
    )


class _Instances:
    """Hands each MCP session its own environment instance."""

    def __init__(self, served: ServedEnvironment, scope: SessionScope) -> None:
        self.served = served
        self.scope = scope
        self._process_instance: EnvInstance | None = None
        self.created = 0

    def _create(self) -> EnvInstance:
        self.created += 1
        return self.served.new_instance()

    async def get(self, ctx: ServerRequestContext[Any, Any]) -> EnvInstance:
        if self.scope == "process":
            if self._process_instance is None:
                self._process_instance = self._create()
            return self._process_instance
        # The per-connection state of the 2025 session loop. `ServerRequestContext` does not expose
        # the connection publicly in mcp 2.3 (pinned), so read it from the session wrapper.
        connection = getattr(ctx.session, "_connection", None)
        if connection is None or getattr(connection, "session_id", None) is None:
            raise MCPError(
                code=types.INVALID_REQUEST,
                message="this server keeps one environment per MCP session; connect with the session "
                "handshake (initialize, Mcp-Session-Id) to call tools",
            )
        instance = connection.state.get(_STATE_KEY)
        if instance is None:
            instance = self._create()
            connection.state[_STATE_KEY] = instance
            # Released when the session ends (client DELETE, idle timeout or disconnect).
            connection.exit_stack.push_async_callback(self._release, instance, connection.session_id)
            log.info("mcp.session_instance", env=self.served.name, session=connection.session_id)
        return instance

    async def _release(self, instance: EnvInstance, session_id: str) -> None:
        log.info("mcp.session_closed", env=self.served.name, session=session_id)
        await instance.aclose()

    async def aclose(self) -> None:
        if self._process_instance is not None:
            instance, self._process_instance = self._process_instance, None
            await instance.aclose()


def build_server(served: ServedEnvironment, *, scope: SessionScope) -> tuple[Server[Any], _Instances]:
    """A low-level MCP server for `served`, and the holder of its per-session instances."""
    instances = _Instances(served, scope)
    tools = [mcp_tool(s, writes=s.name in served.write_tools) for s in served.tool_specs]
    names = {t.name for t in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"unknown tool {params.name!r}; available: {', '.join(sorted(names)) or 'none'}",
            )
        instance = await instances.get(ctx)
        result = await instance.call(params.name, dict(params.arguments or {}))
        log.debug("mcp.tool_call", env=served.name, tool=params.name, ok=result.ok)
        if not result.ok:
            return types.CallToolResult(
                content=[types.TextContent(text=result.error or f"{params.name} failed")], is_error=True
            )
        output = result.output
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content=output if isinstance(output, dict) else None,
        )

    server: Server[Any] = Server(
        f"arena-{served.name}",
        version=served.version,
        title=served.title or served.name,
        description=served.description or None,
        instructions=served.description or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    if scope == "session":

        async def no_discover(
            ctx: ServerRequestContext[Any, Any], params: types.RequestParams | None
        ) -> types.DiscoverResult:
            # The session-less 2026 protocol cannot give a client its own database; declining
            # discovery makes 2026-capable clients fall back to the 2025 session handshake.
            raise MCPError(
                code=types.METHOD_NOT_FOUND, message="server/discover is not offered: use initialize"
            )

        server.add_request_handler("server/discover", types.RequestParams, no_discover)
    return server, instances


async def serve_stdio(served: ServedEnvironment) -> None:
    """Serve over this process's stdin/stdout until the client disconnects."""
    from mcp.server.stdio import stdio_server

    server, instances = build_server(served, scope="process")
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        with anyio.CancelScope(shield=True):
            await instances.aclose()


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: `serve_http` stops it on SIGINT/SIGTERM so that the
    process exits 0 (uvicorn re-raises the signal after shutting down, which kills the process)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_http(
    served: ServedEnvironment,
    sock: socket.socket,
    *,
    host: str,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at `/mcp` on an already bound socket until cancelled or signalled."""
    server, instances = build_server(served, scope="session")
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    web = _Uvicorn(config)
    port = sock.getsockname()[1]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}/mcp"
    try:
        async with anyio.create_task_group() as tg:

            async def serve() -> None:
                await web.serve(sockets=[sock])
                tg.cancel_scope.cancel()  # stop the signal watcher too

            async def watch_signals() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for signum in signals:
                        log.info("mcp.http_stopping", signal=signal.Signals(signum).name)
                        web.should_exit = True  # graceful: open sessions end, instances are released

            tg.start_soon(serve)
            tg.start_soon(watch_signals)
            # Announce only once uvicorn accepts connections, so callers can connect right away.
            while not web.started:
                if web.should_exit:
                    return
                await anyio.sleep(0.02)
            log.info("mcp.http_listening", env=served.name, url=url)
            if on_ready is not None:
                on_ready(url)
    finally:
        with anyio.CancelScope(shield=True):
            await instances.aclose()
