"""`arena run`: the daemon."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ops.cli import Cli, CliError


def register(cli: Cli) -> None:
    """Add `arena run`."""
    p = cli.command("run", "Run the Arena daemon (rounds of evaluate → ... → publish, admin API).")
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.add_argument("--rounds", type=int, metavar="N", help="stop after N rounds (a resumed round counts)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Start the daemon in the foreground; exits 0 on stop or SIGTERM."""
    import anyio
    import structlog

    from arena.store import StoreError
    from ops.admin import AdminExposureError
    from ops.config import ConfigError
    from ops.daemon import Daemon
    from ops.logging import configure_logging
    from ops.preflight import load_checked_config

    if args.rounds is not None and args.rounds < 1:
        raise CliError(f"--rounds must be at least 1, got {args.rounds}")
    try:
        # Every check `arena config check` makes: a file it refuses is refused here too.
        config, notes = load_checked_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    progress = None
    if sys.stdout.isatty():
        from ops.progress import TerminalProgress

        progress = TerminalProgress()
    try:
        daemon = Daemon(config, max_rounds=args.rounds, progress=progress)
    except AdminExposureError as exc:
        raise CliError(str(exc)) from None
    configure_logging(config.logging.level, config.logging.format)
    log = structlog.get_logger("ops.commands.run")
    for note in notes:
        if note.startswith("warning: "):
            log.warning("config.check", note=note.removeprefix("warning: "))
        else:
            log.info("config.check", note=note)

    async def main() -> int:
        if progress is None:
            return await daemon.run()
        with progress:
            return await daemon.run()

    try:
        return anyio.run(main)
    except (StoreError, OSError) as exc:
        raise CliError(str(exc)) from None
