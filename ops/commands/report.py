"""`arena report [--json] [--rounds A:B]`: what each round measured, diagnosed, planned, made and published."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ops.cli import Cli, CliError
from ops.commands.admin import interval_text, public_lines
from ops.phases.yardstick_scores import PairedChange
from ops.yardstick_history import RoundYardstick, table


def register(cli: Cli) -> None:
    """Add `arena report`."""
    p = cli.command(
        "report",
        "One record per round: yardstick and fresh pass rates, diagnosis, plan, synthesized tasks, "
        "GRPO figures, publish decision.",
    )
    p.add_argument("--json", action="store_true", help="print the records as JSON (one document)")
    p.add_argument("--rounds", metavar="A:B", help="rounds A to B inclusive (A:, :B or one round N)")
    p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
    p.set_defaults(func=show)


def parse_rounds(text: str | None) -> tuple[int | None, int | None]:
    """`"2:4"` -> (2, 4), `"3:"` -> (3, None), `":5"` -> (None, 5), `"7"` -> (7, 7)."""
    if not text:
        return None, None
    first, sep, last = text.partition(":")
    try:
        a = int(first) if first.strip() else None
        b = int(last) if last.strip() else None
    except ValueError:
        raise CliError(f"--rounds must look like A:B, A:, :B or N (round numbers), got {text!r}") from None
    if not sep:
        b = a
    if a is not None and b is not None and a > b:
        raise CliError(f"--rounds {text}: the first round is after the last")
    return a, b


def show(args: argparse.Namespace) -> int:
    """Print the records."""
    from ops.commands.diagnose import read_store
    from ops.report import read_records

    first, last = parse_rounds(args.rounds)
    records = read_store(args.config, lambda s: read_records(s, first, last))
    if args.json:
        print(json.dumps({"rounds": records}, indent=2))
        return 0
    if not records:
        print("no rounds stored" + (f" in {args.rounds}" if args.rounds else ""))
        return 0
    by_round = [
        RoundYardstick.model_validate(r["yardstick_by_round"]) for r in records if r.get("yardstick_by_round")
    ]
    if by_round:
        print(
            "\n".join(
                [
                    "yardstick by round (live policy; changes paired over the same tasks, 95% intervals)",
                    *table(by_round),
                ]
            )
        )
        print()
    print("\n\n".join(render(r) for r in records))
    return 0


def _change(change: dict[str, Any]) -> str:
    """A paired change as text (`ops.phases.yardstick_scores.PairedChange.text`)."""
    return PairedChange.model_validate(change).text()


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def render(r: dict[str, Any]) -> str:
    """One record as text."""
    lines = [f"round {r['round']} ({r['status']})"]
    yard = r.get("yardstick")
    if yard:
        reused = yard.get("reused_from")
        note = f", reused from round {reused['round']} {reused['stage']}" if reused else ""
        lines.append(
            f"  yardstick   {interval_text(yard['overall'])}  policy {yard['policy']}, every tool{note}"
        )
        by_round = r.get("yardstick_by_round") or {}
        for key, label in (("since_first", "since round 1"), ("since_previous", "since previous")):
            if by_round.get(key):
                lines.append(f"    {label:<17} {_change(by_round[key])}")
        for env, levels in sorted(yard["envs"].items()):
            per = "  ".join(f"{lv} {interval_text(s)}" for lv, s in levels.items() if lv != "all")
            lines.append(f"    {env:<20} {interval_text(levels.get('all'))}  {per}")
        shares = [("warmup_change", "warm-up share"), ("grpo_change", "GRPO share")]
        if not by_round.get("grpo_change"):  # a warm-up not measured apart: the two together
            shares.append(("training_change", "training share"))
        for key, label in shares:
            if by_round.get(key):
                lines.append(f"    {label:<17} {_change(by_round[key])}")
    lines += public_lines(r.get("public_yardstick"), label="  public     ", indent="    ")
    lines += public_lines(r.get("public_tau2"), label="  public     ", indent="    ")
    fresh = r["fresh"]
    rates = ", ".join(f"{e} {v:.2f}" for e, v in sorted(fresh["pass_rates"].items())) or "-"
    lines.append(f"  fresh       {rates}  ({fresh['tool_view']})")
    diag = r.get("diagnosis")
    if diag:
        weak = ", ".join(f"{w['env']} ({(w.get('score') or 0):.2f})" for w in diag["weak_envs"]) or "none"
        lines.append(f"  diagnosis   {diag['source']}: weak {weak}")
        for m in diag.get("weak_motifs", []):
            lines.append(f"    motif     {m.get('motif') or m}")
        for p in diag["patterns"][:5]:
            lines.append(
                f"    pattern   {p.get('env')}: {p.get('category')} {p.get('description', '')}"[:160]
            )
    plan = r.get("plan")
    if plan:
        unseen = sum(1 for d in plan.get("holds", []) if d.get("action") == "insufficient")
        held = f"{plan['held']} held" + (f" ({unseen} with too few episodes)" if unseen else "")
        lines.append(f"  plan        budget {_counts(plan['budget'])}; {held}")
        for g in plan["guidelines"]:
            what = "; ".join(str(g[k]) for k in ("motif", "skill", "failure_pattern") if k in g)
            lines.append(f"    guideline {g['env']} x{g.get('n_tasks', '?')}: {what}"[:160])
        for d in plan["decisions"]:
            lines.append(f"    {d['action']:<9} {d['env']}: {d.get('reason', '')}"[:160])
    synth = r.get("synthesize")
    if synth:
        lines.append(f"  synthesize  {synth['tasks']} tasks: {_counts(synth['per_env'])}")
        lines.append(f"    by origin {_counts(synth['per_origin'])}")
        for key in ("per_motif", "per_skill"):
            if synth[key]:
                lines.append(f"    by {key[4:]:<6} {_counts(synth[key])}")
    train = r.get("train")
    if train:
        if train.get("skipped"):
            lines.append(f"  train       skipped: {train['skipped']}")
        else:
            rm, pr = train.get("reward_mean"), train.get("pass_rate")
            lines.append(
                f"  train       {train['steps']} GRPO steps, reward {rm if rm is None else round(rm, 3)}, "
                f"pass {pr if pr is None else round(pr, 3)}, zero-variance groups "
                f"{train.get('zero_variance_groups', '-')}/{train.get('groups', '-')} ({train['tool_view']})"
            )
            if train.get("infra_errors"):
                lines.append(
                    f"    warning   {train['infra_errors']} of {train.get('episodes', '?')} episodes ended on an "
                    "environment or model failure: left out of their groups and of the reward and pass rate"
                )
            if train.get("chain_breaks"):
                lines.append(
                    f"    warning   {train['chain_breaks']} of {train.get('episodes', '?')} episodes broke their "
                    "token chain: their turns after the break were not trained (docs/deployment.md)"
                )
    pub = r.get("publish")
    if pub:
        reason = (pub.get("gate") or {}).get("reason")
        lines.append(f"  publish     {pub['policy']}" + (f": {reason}" if reason else ""))
    return "\n".join(lines)
