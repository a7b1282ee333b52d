"""`arena mcp ENV [--http HOST:PORT] [--env-path ...]`: serve an environment as an MCP server.

Over stdio by default (for MCP clients that spawn the server), or streamable HTTP at
`http://HOST:PORT/mcp` with `--http` (port 0 picks a free port; the URL is printed on stderr).
Every MCP session gets its own copy of the environment's database; a synthesized environment (or
every one under ARENA_SANDBOX=all) runs its tools in the sandbox. Logs go to stderr: on stdio,
stdout is the protocol channel.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from ops.cli import Cli, CliError
from ops.commands.envs import env_path_of, env_path_parent, load_or_fail, resolve_one

if TYPE_CHECKING:
    from arena.env.runtime import Environment


def parse_address(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) into host and port; a clear error when malformed."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise CliError(
            f"--http wants HOST:PORT (e.g. 127.0.0.1:8900, port 0 for any free port), got {value!r}"
        )
    return host, int(port_text)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Load the environment, then serve it until the client leaves (stdio) or a signal (HTTP)."""
    from arena.listen import listening_socket
    from ops.logging import configure_logging

    configure_logging(level=args.log_level, fmt="auto", stream=sys.stderr)
    address = parse_address(args.http) if args.http else None
    env = load_or_fail(resolve_one(args.env, env_path_of(args)))
    if env.kind != "executable":
        raise CliError(
            f"environment {env.name!r} is simulated (its tools are played by the helper model); "
            "`arena mcp` serves executable environments"
        )
    if address is None:
        anyio.run(_serve, env, None, "")
        return 0
    host, port = address
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        raise CliError(exc.strerror or str(exc)) from None
    try:
        anyio.run(_serve, env, sock, host)
    finally:
        sock.close()
    return 0


async def _serve(env: Environment, sock: socket.socket | None, host: str) -> None:
    """Serve `env`; a sandboxed one (synthesized, or ARENA_SANDBOX=all) with a sandbox pool."""
    from arena.mcp.server import ServedEnvironment, serve_http, serve_stdio

    async with contextlib.AsyncExitStack() as stack:
        kwargs: dict[str, Any] = {}
        if env.sandboxed:
            from arena.sandbox import SandboxPool

            # Workers talk over pipes, never the process's stdout, so stdio MCP stays clean.
            kwargs["sandbox"] = await stack.enter_async_context(SandboxPool(workers=1))
        served = ServedEnvironment.from_environment(env, **kwargs)
        if sock is None:
            await serve_stdio(served)
        else:
            await serve_http(served, sock, host=host, on_ready=_announce(env.name))


def _announce(name: str) -> Callable[[str], None]:
    def announce(url: str) -> None:
        print(f"arena mcp: serving {name} at {url}", file=sys.stderr, flush=True)

    return announce


def register(cli: Cli) -> None:
    """Add `arena mcp`."""
    parser = cli.commands.add_parser(
        "mcp",
        help="serve an environment as an MCP server (stdio, or streamable HTTP with --http)",
        description=__doc__,
        parents=[env_path_parent()],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("env", metavar="ENV", help="environment name, or the path of an environment folder")
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="stderr log level",
    )
    parser.set_defaults(func=cmd_mcp)
