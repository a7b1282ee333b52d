"""The `arena` command line.

Subcommands live in `ops/commands/*.py`; each module defines `register(cli: Cli) -> None` and adds
its parsers there. Groups such as `envs`, `tasks` or `bench` are shared: any module can add a
subcommand to a group with `cli.group("bench")`, so features add commands without editing a
central list.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from ops import commands


class CliError(Exception):
    """A user-facing error: printed as one clear line, exit status 2, no traceback."""


class Cli:
    """The argparse tree, with shared subcommand groups."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(
            prog="arena", description="Arena: a self-evolving arena that trains tool-calling agents."
        )
        self.commands = self.parser.add_subparsers(dest="command", metavar="COMMAND")
        self.commands.required = True
        self._groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}

    def command(self, name: str, help: str) -> argparse.ArgumentParser:
        """A top-level subcommand."""
        return self.commands.add_parser(name, help=help, description=help)

    def group(self, name: str, help: str = "") -> argparse._SubParsersAction[argparse.ArgumentParser]:
        """The subparsers of a shared group (`arena envs ...`, `arena bench ...`), created on first use."""
        if name not in self._groups:
            parser = self.commands.add_parser(name, help=help or f"{name} commands")
            sub = parser.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND")
            sub.required = True
            self._groups[name] = sub
        return self._groups[name]


def build_cli() -> Cli:
    """Import every command module and let it register its parsers."""
    cli = Cli()
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(cli)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `arena` script."""
    cli = build_cli()
    args = cli.parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        cli.parser.print_help()
        return 2
    try:
        result = func(args)
        sys.stdout.flush()  # a closed pipe shows here, not as an "Exception ignored" at exit
    except CliError as exc:
        print(f"arena: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    return int(result or 0)


def _reader_went_away() -> int:
    """`arena status | head`: the reader closed the pipe; end quietly, as Unix tools do."""
    # Python flushes stdout again at exit and would raise once more: point it at /dev/null.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # killed by SIGPIPE, as the shell reports for `yes | head`


if __name__ == "__main__":
    sys.exit(main())
