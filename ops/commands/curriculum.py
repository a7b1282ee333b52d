"""`arena curriculum show [--json]`: print the stored curriculum state per environment."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ops.cli import Cli


def register(cli: Cli) -> None:
    """Add `arena curriculum show`."""
    p = cli.group("curriculum", "curriculum commands").add_parser(
        "show", help="Show each environment's difficulty, task budget and success history."
    )
    p.add_argument("--json", action="store_true", help="print the stored state as JSON")
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.set_defaults(func=show)


def show(args: argparse.Namespace) -> int:
    """Print the stored curriculum rows."""
    from arena.store import repo
    from arena.store.repo import as_utc_iso
    from ops.commands.diagnose import read_store

    async def read(session: Any) -> dict[str, dict[str, Any]]:
        rows = await repo.curriculum_states(session)
        return {
            env: {
                "round": row.round,
                "difficulty_score": row.difficulty,
                "budget": row.budget,
                "pass_history": list(row.pass_history),
                "state": row.data,
                "updated_at": as_utc_iso(row.updated_at),
            }
            for env, row in sorted(rows.items())
        }

    state = read_store(args.config, read)
    if args.json:
        print(json.dumps({"envs": state}, indent=2))
        return 0
    if not state:
        print("no curriculum state stored yet")
        return 0
    print(f"{'environment':<24} {'round':>5} {'budget':>6} {'score':>6}  {'success':>7}  knobs")
    for env, row in state.items():
        data = row["state"] or {}
        ema = data.get("success_ema")
        knobs = ", ".join(f"{k}={v}" for k, v in (data.get("difficulty") or {}).items())
        success = "-" if ema is None else f"{ema:.2f}"
        print(
            f"{env:<24} {row['round']:>5} {row['budget']:>6} {row['difficulty_score']:>6.2f}  {success:>7}  {knobs}"
        )
    return 0
