"""`arena envs import-mcp -- COMMAND [ARGS...]` and `arena envs import-tools FILE.json`.

Both turn a tool catalogue into a simulated environment folder (env.toml + tools.json) through
`simulate.importers`: a live MCP server's `tools/list` (started over stdio with the real `mcp`
client) or a JSON file (MCP `tools/list` or OpenAI function list). The quality filter runs on
every tool and dropped tools are reported with their reasons. Add the folder's parent with
`--env-path` (or `ARENA_ENV_PATH`) to use it.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import anyio

from arena.env.registry import discover
from ops.cli import Cli, CliError
from ops.commands.envs import quiet_logs
from simulate.importers import (
    ImportedTool,
    ImportReport,
    ToolImportError,
    env_name_from,
    read_tools_file,
    tools_from_mcp,
    write_simulated_env,
)

DEFAULT_OUT_ROOT = Path("imported_envs")


def _name(args: argparse.Namespace, fallback: str) -> str:
    if args.name:
        return args.name
    name = env_name_from(fallback)
    # Never shadow a known environment (an import of `arena mcp food_delivery` is not food_delivery).
    return f"{name}_sim"[:64] if name in discover(include_environ=True) else name


def _category(args: argparse.Namespace, name: str) -> list[str]:
    if args.category:
        parts = [p.strip() for p in args.category.split("/") if p.strip()]
        if not parts:
            raise CliError("--category must look like 'Top level/Sub category'")
        return parts
    return ["Imported", name.capitalize()]


def _write(
    args: argparse.Namespace, tools: list[ImportedTool], *, name: str, label: str, source: str, what: str
) -> int:
    out = Path(args.out) if args.out else DEFAULT_OUT_ROOT / name
    label = label.replace("_", " ").replace("-", " ").strip() or name
    try:
        report = write_simulated_env(
            tools,
            out,
            name=name,
            title=args.title or f"{label.title()} (simulated)",
            category=_category(args, label),
            description=args.description or f"Tools imported from {what}; the helper model plays them.",
            rules=args.rules or "",
            source=source,
        )
    except ToolImportError as exc:
        raise CliError(str(exc)) from None
    _print(report, as_json=args.json)
    return 0


def _print(report: ImportReport, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    print(f"wrote simulated environment {report.env!r} to {report.path}: {len(report.kept)} tools kept")
    if report.dropped:
        print(f"dropped {len(report.dropped)} tools:")
        for d in report.dropped:
            print(f"  {d.name}: {'; '.join(d.reasons)}")
    print(f"use it with: arena envs show {report.env} --env-path {Path(report.path).parent}")


def cmd_import_mcp(args: argparse.Namespace) -> int:
    """Handler of `arena envs import-mcp`."""
    quiet_logs()
    command = list(args.server)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CliError(
            "give the MCP server command after --, e.g. arena envs import-mcp -- arena mcp food_delivery"
        )
    try:
        listed = anyio.run(lambda: tools_from_mcp(command[0], command[1:], timeout_s=args.timeout))
    except ToolImportError as exc:
        raise CliError(str(exc)) from None
    source = "mcp: " + shlex.join(command)
    fallback = listed.server_name or Path(command[0]).name
    if Path(command[0]).name == "arena" and len(command) >= 3 and command[1] == "mcp":
        fallback = command[2]  # `arena mcp ENV`: name it after the environment it serves
    return _write(
        args,
        listed.tools,
        name=_name(args, fallback),
        label=fallback,
        source=source,
        what=f"the MCP server `{shlex.join(command)}`",
    )


def cmd_import_tools(args: argparse.Namespace) -> int:
    """Handler of `arena envs import-tools`."""
    quiet_logs()
    path = Path(args.file)
    try:
        tools = read_tools_file(path)
    except ToolImportError as exc:
        raise CliError(str(exc)) from None
    return _write(
        args, tools, name=_name(args, path.stem), label=path.stem, source=f"file: {path.name}", what=path.name
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", help="folder to write (default: imported_envs/NAME)")
    p.add_argument("--name", help="environment name (default: from the server or file name)")
    p.add_argument("--title", help="human title")
    p.add_argument("--category", metavar="TOP/SUB", help="category path, e.g. 'Lifestyle/Food delivery'")
    p.add_argument("--description", help="what the environment is, shown to the agent")
    p.add_argument("--rules", help="policy text shown to the agent")
    p.add_argument("--json", action="store_true", help="machine-readable report")


def register(cli: Cli) -> None:
    """Add `arena envs import-mcp` and `arena envs import-tools`."""
    group = cli.group("envs")
    p = group.add_parser(
        "import-mcp",
        help="turn a live MCP server's tools into a simulated environment",
        description="Start COMMAND as an MCP server over stdio, read its tools/list, filter the tools "
        "and write a simulated environment folder.",
    )
    _common(p)
    p.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the server (default 120)"
    )
    p.add_argument(
        "server", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]", help="the MCP server command"
    )
    p.set_defaults(func=cmd_import_mcp)
    p = group.add_parser(
        "import-tools",
        help="turn an OpenAI function list or MCP tools/list JSON into a simulated environment",
    )
    p.add_argument("file", metavar="FILE.json", help="the tool list")
    _common(p)
    p.set_defaults(func=cmd_import_tools)
