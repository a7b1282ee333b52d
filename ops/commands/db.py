"""`arena db upgrade`: apply the store's migrations."""

from __future__ import annotations

import argparse
from pathlib import Path

from ops.cli import Cli, CliError


def register(cli: Cli) -> None:
    """Add `arena db upgrade`."""
    p = cli.group("db", "store commands").add_parser(
        "upgrade", help="Apply pending migrations to the store (also done when the daemon starts)."
    )
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.set_defaults(func=upgrade)


def upgrade(args: argparse.Namespace) -> int:
    """Migrate the configured store to the newest schema."""
    import anyio

    from arena.store import Store, StoreError
    from ops.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None

    async def main() -> tuple[str | None, str]:
        async with Store(config.database_url, busy_timeout_s=config.store.busy_timeout_s) as store:
            before = await store.revision()
            return before, await store.migrate()

    try:
        before, head = anyio.run(main)
    except (StoreError, OSError) as exc:
        raise CliError(str(exc)) from None
    print(
        f"store at revision {head}"
        + (" (already current)" if before == head else f" (was {before or 'empty'})")
    )
    return 0
