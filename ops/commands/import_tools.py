"""`arena envs import-mcp -- COMMAND [ARGS...]` and `arena envs import-tools FILE.json`.

Both turn a tool catalogue into a simulated environment folder (env.toml + tools.json) through
`simulate.importers`: a live MCP server's `tools/list` (started over stdio with the real `mcp`
client) or a JSON file (MCP `tools/list` or OpenAI function list). Parameters the source left
undescribed get a description from the helper model (`--helper`, default the embedded model;
`--helper none`: the deterministic fallback only), marked as generated in tools.json; then the
quality filter runs on every tool and dropped tools are reported with their reasons.

The folder goes to `DATA_DIR/envs/NAME` unless `--out` says otherwise: the daemon loads every
environment there at the start of each phase, so the next round draws the import into its arena
and training pools with no other step.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

import anyio

from arena.env.registry import discover, env_dirs_in, env_name_of, env_path_from_environ
from ops.cli import Cli, CliError
from ops.commands.envs import daemon_config, quiet_logs
from simulate.importers import (
    ImportedTool,
    ImportReport,
    ToolImportError,
    env_name_from,
    read_tools_file,
    tools_from_mcp,
    write_simulated_env,
)


def daemon_loads(config: Any, folder: Path) -> bool:
    """Whether the daemon with `config` loads the environment folder `folder`."""
    folder = folder.resolve()
    entries = [config.envs_dir, *config.data.env_path, *env_path_from_environ()]
    return any(folder == d.resolve() for e in entries for d in env_dirs_in(Path(e).expanduser()))


def _name(args: argparse.Namespace, fallback: str, config: Any) -> str:
    if args.name:
        return args.name
    name = env_name_from(fallback)
    # Never shadow a known environment (an import of `arena mcp food_delivery` is not food_delivery).
    # An earlier import of the same name (DATA_DIR/envs/NAME) is not shadowed but refused by _write.
    root = config.envs_dir
    known = set(discover(include_environ=True))
    known |= {env_name_of(d) for d in env_dirs_in(root) if d.resolve() != (root / name).resolve()}
    return f"{name}_sim"[:64] if name in known else name


def _category(args: argparse.Namespace, name: str) -> list[str]:
    if args.category:
        parts = [p.strip() for p in args.category.split("/") if p.strip()]
        if not parts:
            raise CliError("--category must look like 'Top level/Sub category'")
        return parts
    return ["Imported", name.capitalize()]


async def _describe(args: argparse.Namespace, tools: list[ImportedTool]) -> None:
    """Write the missing parameter descriptions (the helper is loaded only when it has work)."""
    from simulate.param_descriptions import fill_missing_descriptions, needs_helper

    helper = None
    if args.helper.lower() != "none" and needs_helper(tools):
        from ops.commands.synth import load_helper

        helper = await load_helper(args.helper)
    await fill_missing_descriptions(tools, helper)


def _write(
    args: argparse.Namespace,
    tools: list[ImportedTool],
    *,
    name: str,
    label: str,
    source: str,
    what: str,
    config: Any,
) -> int:
    out = Path(args.out) if args.out else config.envs_dir / name
    if out.exists() and any(out.iterdir()):
        hint = "choose another --out" if args.out else "remove it to import again, or pass --name or --out"
        raise CliError(f"{out} already exists and is not empty; {hint}")
    label = label.replace("_", " ").replace("-", " ").strip() or name
    anyio.run(_describe, args, tools)
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
    _print(report, as_json=args.json, loaded=daemon_loads(config, out))
    return 0


def _print(report: ImportReport, *, as_json: bool, loaded: bool) -> None:
    if as_json:
        print(json.dumps({**report.model_dump(mode="json"), "daemon_loads": loaded}, indent=2))
        return
    print(f"wrote simulated environment {report.env!r} to {report.path}: {len(report.kept)} tools kept")
    if report.generated:
        by_helper = sum(g.by == "helper" for g in report.generated)
        print(
            f"wrote {len(report.generated)} missing parameter descriptions "
            f"({by_helper} by the helper, {len(report.generated) - by_helper} by the fallback):"
        )
        for g in report.generated:
            print(f"  {g.tool}.{g.parameter} [{g.by}]: {g.text}")
    if report.dropped:
        print(f"dropped {len(report.dropped)} tools:")
        for d in report.dropped:
            print(f"  {d.name}: {'; '.join(d.reasons)}")
    if loaded:
        print("the daemon loads it from its next phase on: the next round draws it into its pools")
    else:
        print("the daemon does not load this folder: add its parent to ARENA_ENV_PATH (or data.env_path)")
    print(f"show it with: arena envs show {report.env} --env-path {Path(report.path).parent}")


def cmd_import_mcp(args: argparse.Namespace) -> int:
    """Handler of `arena envs import-mcp`."""
    quiet_logs()
    config = daemon_config(args)
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
        name=_name(args, fallback, config),
        label=fallback,
        source=source,
        what=f"the MCP server `{shlex.join(command)}`",
        config=config,
    )


def cmd_import_tools(args: argparse.Namespace) -> int:
    """Handler of `arena envs import-tools`."""
    quiet_logs()
    config = daemon_config(args)
    path = Path(args.file)
    try:
        tools = read_tools_file(path)
    except ToolImportError as exc:
        raise CliError(str(exc)) from None
    return _write(
        args,
        tools,
        name=_name(args, path.stem, config),
        label=path.stem,
        source=f"file: {path.name}",
        what=path.name,
        config=config,
    )


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        metavar="DIR",
        help="folder to write (default: DATA_DIR/envs/NAME, which the daemon loads on its next round)",
    )
    p.add_argument(
        "--config", metavar="FILE", help="the daemon's configuration, for its data dir (default ARENA_CONFIG)"
    )
    p.add_argument(
        "--helper",
        default="embedded",
        metavar="MODEL",
        help="writes missing parameter descriptions: 'embedded' (default), a model folder, "
        "or 'none' (derived from the name and schema only)",
    )
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
