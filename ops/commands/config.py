"""`arena config show [--json]` and `arena config check`.

`show` prints the effective configuration (file + `ARENA_*` variables) as a TOML file that
`arena run --config` accepts as it is: derived values (the store's effective URL) appear only as
comments, and secrets are never written: a comment names the variable that carries each one.
`check` loads a configuration the way `arena run` does (`ops.preflight`) and reports whether the
daemon would start.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Table

from ops.cli import Cli, CliError
from ops.config import SECRET_ENV, ArenaConfig, ConfigError, load_config
from ops.config_trainer import settings_dump


def register(cli: Cli) -> None:
    """Add `arena config show` and `arena config check`."""
    group = cli.group("config", "configuration commands")
    p = group.add_parser(
        "show",
        help="Print the effective configuration (file + ARENA_* variables) as a loadable TOML file; "
        "secrets are left out.",
    )
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.add_argument("--json", action="store_true", help="print JSON (secrets as asterisks) instead of TOML")
    p.set_defaults(func=show)
    p = group.add_parser(
        "check", help="Load a configuration as `arena run` does; exit 0 when the daemon would accept it."
    )
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.set_defaults(func=check)


def _load(path: Path | None) -> ArenaConfig:
    try:
        return load_config(path)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def show(args: argparse.Namespace) -> int:
    """Print the effective configuration."""
    config = _load(args.config)
    if args.json:
        data = settings_dump(config.redacted())
        data["store"]["effective_url"] = data["store"].pop("url")
        print(json.dumps(data, indent=2))
    else:
        print(to_toml(config), end="")
    return 0


def check(args: argparse.Namespace) -> int:
    """Validate a configuration with the checks `arena run` makes before it starts (`ops.preflight`)."""
    from ops.preflight import load_checked_config

    try:
        _, notes = load_checked_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    for note in notes:
        print(note)
    print(f"configuration OK ({args.config or 'defaults and ARENA_* variables'})")
    return 0


def to_toml(config: ArenaConfig) -> str:
    """`config` as a TOML document that loads back to the same configuration (secrets left out)."""
    # The trainer fields the daemon derives from other sections are not keys a file may set.
    data = settings_dump(config.model_dump(mode="json"))
    secrets = {key for key in SECRET_ENV if _is_secret(config, key)}
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Arena configuration (`arena config show`): load it with `arena run --config`."))
    doc.add(tomlkit.comment("Secrets are not written here; the comments name the variables that set them."))
    for name, section in data.items():
        doc.add(tomlkit.nl())
        doc.add(name, _table(section, name, secrets))
        if name == "store":
            # Derived, not a key: what the daemon connects to when url is unset (password hidden).
            doc[name].add(tomlkit.comment(f"effective URL: {config.redacted()['store']['url']}"))
    return tomlkit.dumps(doc)


def _is_secret(config: ArenaConfig, dotted: str) -> bool:
    if dotted == "store.url":
        # A URL is a secret only when it carries a password (user:password@host).
        url = config.store.url or ""
        return "@" in url and ":" in url.partition("://")[2].rpartition("@")[0]
    node: Any = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node is not None


def _table(values: dict[str, Any], prefix: str, secrets: set[str]) -> Table:
    nested = [k for k, v in values.items() if isinstance(v, dict)]
    table = tomlkit.table(is_super_table=bool(nested) and len(nested) == len(values))
    # Plain keys before sub-tables: in TOML a key (or an "unset" comment) written after a sub-table
    # would read as the sub-table's.
    for key, value in sorted(values.items(), key=lambda item: isinstance(item[1], dict)):
        dotted = f"{prefix}.{key}"
        if dotted in secrets:
            table.add(tomlkit.comment(f"{key}: secret, not shown; set {SECRET_ENV[dotted]}"))
        elif isinstance(value, dict):
            table.add(key, _table(value, dotted, secrets))
        elif value is None:
            table.add(tomlkit.comment(f"{key}: unset"))
        else:
            table.add(key, value)
    return table
