"""`arena envs import-bfcl --from PATH`: BFCL multi-turn as held-out public environments.

PATH is a `bfcl-eval` wheel (`pip download --no-deps bfcl-eval`) or an installed `bfcl_eval`
package folder; Arena never downloads or bundles it. The import goes to `DATA_DIR/public/bfcl`
(`--out` elsewhere), which no phase draws training or synthesis from: the daemon runs a fixed
sample of it every round as the public yardstick (`[public]`), and `arena bench bfcl` runs it on
demand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from arena.public.bfcl.dist import DistributionError
from arena.public.bfcl.model import SUBDIR, env_name
from ops.cli import Cli, CliError
from ops.commands.envs import daemon_config, quiet_logs


def cmd_import_bfcl(args: argparse.Namespace) -> int:
    """Import, then print what was imported (JSON with `--json`)."""
    from arena.public.bfcl.importer import import_bfcl

    quiet_logs()
    dest = Path(args.out) if args.out else daemon_config(args).data.dir / SUBDIR
    try:
        manifest = import_bfcl(Path(args.source), dest)
    except DistributionError as exc:
        raise CliError(str(exc)) from None
    out = {
        **manifest.model_dump(),
        "folder": str(dest.expanduser().absolute()),
        "environments": {env_name(cat): n for cat, n in manifest.categories.items()},
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"imported {manifest.distribution} {manifest.version} into {out['folder']}")
    for env, n in out["environments"].items():
        print(f"  {env:<20} {n} tasks (held out: never trained or synthesized on)")
    print(f"  backend classes: {', '.join(manifest.classes)}")
    return 0


def register(cli: Cli) -> None:
    """Add `arena envs import-bfcl`."""
    p = cli.group("envs").add_parser(
        "import-bfcl",
        help="import BFCL multi-turn (a bfcl-eval wheel or package folder) as held-out public environments",
    )
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="PATH",
        help="a bfcl-eval wheel (pip download --no-deps bfcl-eval) or an installed bfcl_eval folder",
    )
    p.add_argument("--out", metavar="DIR", help="where to import (default DATA_DIR/public/bfcl)")
    p.add_argument("--config", type=Path, help="TOML configuration file (for the data dir)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_import_bfcl)
