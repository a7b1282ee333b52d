"""`arena config show [--json]`: the effective configuration, secrets redacted."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ops.cli import Cli, CliError


def register(cli: Cli) -> None:
    """Add `arena config show`."""
    p = cli.group("config", "configuration commands").add_parser(
        "show", help="Print the effective configuration (file + ARENA_* variables), secrets redacted."
    )
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    p.set_defaults(func=show)


def show(args: argparse.Namespace) -> int:
    """Print the effective configuration."""
    from ops.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    data = config.redacted()
    data["store"]["effective_url"] = data["store"].pop("url")
    print(json.dumps(data, indent=2) if args.json else to_toml(data))
    return 0


def to_toml(data: dict[str, Any], prefix: str = "") -> str:
    """Render nested JSON data as TOML (None values become comments)."""
    scalars, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif value is None:
            scalars.append(f"# {key} = (unset)")
        else:
            scalars.append(f"{key} = {json.dumps(value)}")
    out = []
    if prefix and scalars:
        out.append(f"[{prefix}]")
    out.extend(scalars)
    for key, value in tables:
        sub = to_toml(value, f"{prefix}.{key}" if prefix else key)
        if sub:
            out.append("")
            out.append(sub)
    return "\n".join(out)
