"""`arena envs import-tau2 --from CHECKOUT --domain retail|airline`: a τ²-bench domain, held out.

CHECKOUT is a tau2-bench checkout (`git clone https://github.com/sierra-research/tau2-bench`);
Arena never downloads or bundles it. The domain's database, policy, tasks (with the checkout's
splits) and the agent's tool schemas go to `DATA_DIR/public/tau2/<domain>` (`--out DIR`: to
`DIR/<domain>`), with the checkout's commit recorded. No phase trains or synthesizes on it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from arena.public.tau2.importer import CheckoutError
from arena.public.tau2.model import DOMAINS, SUBDIR
from ops.cli import Cli, CliError
from ops.commands.envs import daemon_config, quiet_logs


def cmd_import_tau2(args: argparse.Namespace) -> int:
    """Import, then print what was imported (JSON with `--json`)."""
    from arena.public.tau2.importer import import_tau2

    quiet_logs()
    root = Path(args.out) if args.out else daemon_config(args).data.dir / SUBDIR
    dest = root.expanduser().absolute() / args.domain
    try:
        manifest = import_tau2(Path(args.source), args.domain, dest)
    except CheckoutError as exc:
        raise CliError(str(exc)) from None
    out = {**manifest.model_dump(exclude={"splits"}), "folder": str(dest)}
    out["splits"] = {name: len(ids) for name, ids in (manifest.splits or {}).items()}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    commit = manifest.commit[:12] if manifest.commit else "not a git checkout"
    print(f"imported τ² {manifest.domain} ({commit}) into {dest}")
    splits = ", ".join(f"{name} {n}" for name, n in out["splits"].items()) or "none"
    print(f"  {manifest.tasks} tasks (splits: {splits}); held out: never trained or synthesized on")
    print(f"  {len(manifest.tools)} agent tools: {', '.join(manifest.tools)}")
    for note in manifest.notes:
        print(f"  note: {note}")
    return 0


def register(cli: Cli) -> None:
    """Add `arena envs import-tau2`."""
    p = cli.group("envs").add_parser(
        "import-tau2",
        help="import a τ²-bench domain (from a tau2-bench checkout) as a held-out public benchmark",
    )
    p.add_argument("--from", dest="source", required=True, metavar="CHECKOUT", help="a tau2-bench checkout")
    p.add_argument("--domain", required=True, choices=DOMAINS, help="the τ² domain to import")
    p.add_argument(
        "--out", metavar="DIR", help="where to import (DIR/<domain>; default DATA_DIR/public/tau2)"
    )
    p.add_argument("--config", type=Path, help="TOML configuration file (for the data dir)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_import_tau2)
