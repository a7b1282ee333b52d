"""`arena bench tau2 [--json]`: τ²-bench's retail and airline tasks, played and scored by τ²'s rules.

Two sources of agents:

- the policy (default): `[models.policy]` of the configuration (`--model` names another local
  folder, `embedded`, or the served model name) talks with a simulated user played by the helper
  model (`[models.helper]`, as the daemon builds it), which also judges NL assertions;
- `--gold`: each task's gold actions played as a scripted policy with a scripted user through the
  same episodes (`arena.public.tau2.gold`). Every task must pass what the gold can satisfy: the end
  state (DB) and the actions (ACTION) are real checks of the import, the ports, the episode and the
  reward together; COMMUNICATE passes by construction (the gold says the expected information, so
  it checks the plumbing only); NL assertions are not checked (they judge an agent's wording,
  which a scripted gold does not have) and are reported as unchecked.

Tasks: `--domain` (default both), `--limit N` per domain (a fixed sample by `--seed`), `--tasks ID,...`.
`--samples k` plays every task k times (use `--temperature` > 0, or the trials repeat each other)
and reports τ²'s pass^k for k = 1..samples. The import is read from `DATA_DIR/public/tau2/<domain>/`
(`arena envs import-tau2`). Output per domain: pass^1 with a Wilson 95% interval (over all trials),
pass^k, termination counts, seconds per run, and every run's reward and its parts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from ops.cli import Cli, CliError
from ops.commands.envs import daemon_config, quiet_logs
from ops.commands.tau2_parity import add_side_arguments, parity_reports, parity_text

DOMAINS = ("retail", "airline")


def _plan(args: argparse.Namespace, config: Any) -> dict[str, tuple[Any, list[Any]]]:
    """Per domain: the loaded import and the tasks to play."""
    from arena.public.tau2.model import load_domain
    from arena.public.tau2.run import sample

    names = [d.strip() for d in args.domain.split(",") if d.strip()]
    unknown = [d for d in names if d not in DOMAINS]
    if unknown or not names:
        raise CliError(f"--domain: unknown {unknown} (known: {', '.join(DOMAINS)})")
    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be at least 1 (tasks per domain)")
    wanted = [t.strip() for t in (args.tasks or "").split(",") if t.strip()]
    plan: dict[str, tuple[Any, list[Any]]] = {}
    for name in dict.fromkeys(names):
        try:
            domain = load_domain(config.data.dir, name)
        except (FileNotFoundError, ValueError) as exc:
            raise CliError(f"τ² {name}: {exc} (import it with `arena envs import-tau2`)") from None
        tasks = sample(domain.tasks, args.limit, args.seed)
        if wanted:
            tasks = [t for t in domain.tasks if t.id in wanted]
        plan[name] = (domain, tasks)
    if wanted:
        found = {t.id for _, tasks in plan.values() for t in tasks}
        if missing := [t for t in wanted if t not in found]:
            raise CliError(f"--tasks: no τ² tasks {missing} in {', '.join(plan)}")
    if not any(tasks for _, tasks in plan.values()):
        raise CliError("no tasks to run (check --domain, --tasks and --limit)")
    return plan


async def _models(args: argparse.Namespace, config: Any) -> tuple[Any, Any, Any]:
    """The policy, the simulated user and the judge (user and judge on the helper model)."""
    from ops.models import ModelHub
    from simulate.simulators.common import SimulatorSettings
    from simulate.simulators.judge import TrajectoryJudge
    from simulate.simulators.user import SimulatedUser

    if args.model:
        policy_section = config.models.policy.model_copy(update={"model": args.model})
        config = config.model_copy(
            update={"models": config.models.model_copy(update={"policy": policy_section})}
        )
    hub = ModelHub(config)
    try:
        policy, helper = await hub.policy(), await hub.helper()
    except Exception as exc:  # a model that cannot be built is the user's setting to fix
        raise CliError(f"cannot load the models: {type(exc).__name__}: {exc}") from None
    # τ² conversations run long and quote ids: more turns and longer messages than Arena's defaults.
    user = SimulatedUser(
        helper,
        SimulatorSettings(max_tokens=args.user_max_tokens, temperature=args.temperature),
        max_user_turns=args.max_user_turns,
        max_chars=600,
    )
    return policy, user, TrajectoryJudge(helper)


async def _run(
    args: argparse.Namespace, config: Any, plan: dict[str, tuple[Any, list[Any]]]
) -> dict[str, list[Any]]:
    from arena.public.tau2.episode import Tau2Limits
    from arena.public.tau2.gold import GoldPolicy, GoldUser
    from arena.public.tau2.run import play

    limits = Tau2Limits(
        max_steps=args.max_steps,
        max_errors=args.max_errors,
        max_tokens_per_step=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
    )
    policy, user, judge = (None, None, None) if args.gold else await _models(args, config)
    jobs = [
        (name, task, trial)
        for name, (_, tasks) in plan.items()
        for task in tasks
        for trial in range(args.samples)
    ]
    out: dict[str, list[Any]] = {name: [] for name in plan}
    limiter = anyio.CapacityLimiter(args.concurrency)

    async def one(name: str, task: Any, trial: int) -> None:
        async with limiter:
            domain = plan[name][0]
            if args.gold:
                run = await play(domain, task, GoldPolicy(task), GoldUser(), limits, None, trial=trial)
            else:
                run = await play(domain, task, policy, user, limits, judge, trial=trial)
            out[name].append(run)
            if not args.json:
                reward = run.score.reward if run.score else None
                print(f"[bench tau2] {name} {task.id}#{trial}: {reward} ({run.termination})", file=sys.stderr)

    async with anyio.create_task_group() as tg:
        for job in jobs:
            tg.start_soon(one, *job)
    for runs in out.values():
        runs.sort(key=lambda r: (_order(r.task_id), r.trial))
    return out


def _order(task_id: str) -> tuple[int, str]:
    return (int(task_id), "") if task_id.isdigit() else (sys.maxsize, task_id)


def gold_check(run: Any) -> bool:
    """Whether a gold run passed every part the gold can satisfy (all but NL assertions)."""
    s = run.score
    return bool(
        s is not None
        and run.termination in ("user_stop", "agent_stop")
        and s.db is not False
        and all(s.actions or [])
        and all(s.communicate or [])
    )


def report(
    plan: dict[str, tuple[Any, list[Any]]], runs: dict[str, list[Any]], mode: str, seconds: float
) -> dict[str, Any]:
    """The JSON document: per domain the figures and every run."""
    from arena.public.tau2.run import run_row, summarize
    from ops.phases.yardstick_scores import score

    domains: dict[str, Any] = {}
    for name, (domain, _) in plan.items():
        summary = summarize(name, runs[name])
        manifest = getattr(domain, "manifest", None)
        entry: dict[str, Any] = {
            **summary.model_dump(),
            # Trials of one task are not independent: with --samples > 1 the interval is optimistic.
            "pass_1": score(summary.successes, summary.trials).model_dump(),
            "commit": getattr(manifest, "commit", None),
            "runs": [run_row(r) for r in runs[name]],
        }
        if mode == "gold":
            rows = runs[name]
            entry["gold"] = {
                "passed": sum(gold_check(r) for r in rows),
                "runs": len(rows),
                "failed": [r.task_id for r in rows if not gold_check(r)],
                # Tasks whose reward needs NL verdicts, which a gold run cannot have (reward 0 here).
                "nl_unchecked": sorted(
                    {
                        r.task_id
                        for r in rows
                        if r.score and r.score.nl is None and "NL_ASSERTION" in r.score.basis
                    },
                    key=_order,
                ),
            }
        domains[name] = entry
    total = sum(len(r) for r in runs.values())
    return {
        "benchmark": "tau2",
        "mode": mode,
        "runs": total,
        "domains": domains,
        "seconds": round(seconds, 3),
    }


def print_report(doc: dict[str, Any]) -> None:
    """The human-readable form."""
    from ops.commands.admin import interval_text

    print(f"τ²-bench, {doc['mode']}: {doc['runs']} runs in {doc['seconds']} s")
    for name, d in doc["domains"].items():
        ks = ", ".join(f"pass^{k} {v:.3f}" for k, v in d["pass_hat_k"].items() if int(k) > 1)
        per = f"{d['seconds_per_run']:.3f} s per run" if d["seconds_per_run"] is not None else ""
        print(f"  {name:<8} pass^1 {interval_text(d['pass_1'])}" + (f"  {ks}" if ks else "") + f"  {per}")
        print("           ends: " + ", ".join(f"{k} {v}" for k, v in sorted(d["terminations"].items())))
        if "gold" in d:
            g = d["gold"]
            print(
                f"           gold: {g['passed']}/{g['runs']} pass DB/ACTION/COMMUNICATE; failed {g['failed']}"
            )
            print(f"           NL assertions unchecked in {len(g['nl_unchecked'])} tasks")
        for r in d["runs"]:
            parts = " ".join(
                f"{k}={r[k]}" for k in ("db", "actions", "communicate", "nl") if r[k] is not None
            )
            print(f"    {r['task']:>4}#{r['trial']} reward {r['reward']} {r['termination']} {parts}")


def _parity(args: argparse.Namespace, config: Any) -> int:
    """`--parity`: every task's gold actions through Arena and through τ²'s own environment."""
    domains = [d.strip() for d in args.domain.split(",") if d.strip()]
    docs = parity_reports(args, config, domains)
    if args.json:
        print(json.dumps({"parity": docs}, indent=2))
    else:
        print("\n".join(parity_text(docs)))
    return 0 if all(d["all_equal"] for d in docs) else 1


def cmd_bench_tau2(args: argparse.Namespace) -> int:
    """`arena bench tau2`."""
    quiet_logs()
    if min(args.samples, args.max_steps, args.max_errors, args.max_tokens, args.concurrency) < 1:
        raise CliError(
            "--samples, --max-steps, --max-errors, --max-tokens and --concurrency must be at least 1"
        )
    if args.samples > 1 and args.temperature == 0:
        print("[bench tau2] --samples > 1 at temperature 0: the trials will mostly repeat", file=sys.stderr)
    config = daemon_config(args)
    if args.parity:
        return _parity(args, config)
    plan = _plan(args, config)
    started = time.perf_counter()
    runs = anyio.run(_run, args, config, plan)
    policy = config.models.policy
    mode = "gold" if args.gold else f"policy:{policy.backend}:{args.model or policy.model}"
    doc = report(plan, runs, mode, time.perf_counter() - started)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print_report(doc)
    return 0


def register(cli: Cli) -> None:
    """Add `arena bench tau2`."""
    p = cli.group("bench").add_parser(
        "tau2", help="τ²-bench retail/airline: pass^1 and pass^k by τ²'s rules (policy, or --gold)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--config", type=Path, help="TOML configuration ([models.policy], [models.helper], data dir)"
    )
    p.add_argument("--domain", default=",".join(DOMAINS), help="comma-separated (default: retail,airline)")
    p.add_argument("--limit", type=int, metavar="N", help="tasks per domain (a fixed sample by --seed)")
    p.add_argument("--tasks", metavar="ID,...", help="these task ids only (in each domain given)")
    p.add_argument(
        "--samples", type=int, default=1, help="trials per task; pass^k for k up to it (default 1)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the sample and of sampled trials (default 0)")
    p.add_argument("--gold", action="store_true", help="play the gold actions through Arena's episodes")
    p.add_argument("--model", help="policy model instead of [models.policy].model")
    p.add_argument("--max-tokens", type=int, default=1024, help="tokens per policy step (default 1024)")
    p.add_argument("--temperature", type=float, default=0.0, help="policy and user sampling (default 0)")
    p.add_argument("--max-steps", type=int, default=200, help="steps before a run fails (τ² run: 200)")
    p.add_argument("--max-errors", type=int, default=10, help="failed calls before a run fails (τ²: 10)")
    p.add_argument(
        "--max-user-turns", type=int, default=30, help="user messages before it stops (default 30)"
    )
    p.add_argument("--user-max-tokens", type=int, default=256, help="tokens per user message (default 256)")
    p.add_argument("--concurrency", type=int, default=1, help="runs played at once (default 1)")
    p.add_argument(
        "--parity",
        action="store_true",
        help="replay every task's gold actions through Arena and through τ²'s own environment "
        "(--from CHECKOUT, --python SIDE_PYTHON) and compare results and end states",
    )
    add_side_arguments(p)
    p.add_argument("--no-timing", action="store_true", help="--parity without the reset and check timings")
    p.set_defaults(func=cmd_bench_tau2)
