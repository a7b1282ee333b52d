"""`arena status|pause|resume|stop`: clients of the daemon's admin API."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ops.cli import Cli, CliError
from ops.phases.yardstick_scores import PairedChange


def register(cli: Cli) -> None:
    """Add the admin client commands."""
    for name, help_text in (
        ("status", "Show the daemon's round, phase, pause state, progress and pass rates."),
        ("pause", "Pause rounds at the next safe point (persists across restarts)."),
        ("resume", "Resume paused rounds."),
        ("stop", "Ask the daemon to finish its current step and exit."),
    ):
        p = cli.command(name, help_text)
        p.add_argument("--url", help="admin API base URL (default: http://<admin.address> from the config)")
        p.add_argument("--config", type=Path, help="TOML configuration file (default: $ARENA_CONFIG)")
        if name == "status":
            p.add_argument("--json", action="store_true", help="print the raw JSON")
        if name == "pause":
            p.add_argument("--reason", default="", help="why (kept in the audit log)")
        p.set_defaults(func=_handler(name))


def _target(args: argparse.Namespace) -> tuple[str, str | None]:
    from ops.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    token = config.admin.token.get_secret_value() if config.admin.token else None
    if args.url:
        return args.url.rstrip("/"), token
    host = config.admin.host
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"  # listening on every address: reach it locally
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{config.admin.port}", token


def request(method: str, url: str, token: str | None, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One admin API call; user-facing errors as `CliError`."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = float(os.environ.get("ARENA_ADMIN_TIMEOUT", "10"))
    try:
        resp = httpx.request(method, url, headers=headers, json=body, timeout=timeout)
    except httpx.ConnectError:
        raise CliError(f"no daemon answering at {url} (is `arena run` running?)") from None
    except httpx.HTTPError as exc:
        raise CliError(f"admin API at {url} failed: {exc}") from None
    if resp.status_code == 401:
        raise CliError("the daemon refused the admin token: set ARENA_ADMIN_TOKEN to its token")
    try:
        data = resp.json()
    except ValueError:
        raise CliError(f"admin API at {url} answered {resp.status_code} without JSON") from None
    if resp.status_code >= 400:
        raise CliError(f"admin API at {url} answered {resp.status_code}: {data.get('error', data)}")
    return data


def _handler(name: str) -> Any:
    def handler(args: argparse.Namespace) -> int:
        base, token = _target(args)
        if name == "status":
            data = request("GET", f"{base}/status", token)
            print(json.dumps(data, indent=2) if args.json else _render_status(data))
            return 0
        body = {"reason": args.reason} if name == "pause" and args.reason else None
        data = request("POST", f"{base}/{name}", token, body)
        if name == "stop":
            print("stopping: the daemon finishes its current step and exits")
        else:
            state = "paused" if data.get("paused") else "running"
            print(f"{state}" + ("" if data.get("changed") else " (unchanged)"))
        return 0

    return handler


def _render_sandbox(sandbox: dict[str, Any]) -> str:
    if sandbox.get("available") is False:
        return f"sandbox:    UNAVAILABLE, synthesized environments refused: {sandbox.get('detail')}"
    return f"sandbox:    {sandbox.get('detail', 'unknown')}"


def _render_status(data: dict[str, Any]) -> str:
    progress = data.get("progress") or {}
    lines = [
        f"round:      {data.get('round')}  phase: {data.get('phase') or '-'}",
        f"state:      {'paused' if data.get('paused') else 'running'}"
        + (
            f" since {data['paused_since']} ({data.get('pause_reason') or 'no reason'})"
            if data.get("paused")
            else ""
        )
        + ("  stopping" if data.get("stopping") else ""),
        f"ready:      {data.get('ready')}",
        _render_sandbox(data.get("sandbox") or {}),
        f"progress:   {progress.get('done', 0)}/{progress.get('total', 0)} {progress.get('note', '')}".rstrip(),
        f"last round: {data.get('last_completed_round')}",
    ]
    yard = data.get("last_yardstick")
    if yard:
        lines.append(
            f"yardstick:  {interval_text(yard['overall'])}  policy {yard['policy']}, every tool, greedy"
        )
        for key, label in (("since_first", "since round 1"), ("since_previous", "since previous")):
            if yard.get(key):
                change = PairedChange.model_validate(yard[key]).text()
                lines.append(f"  {label:<28} {change} (round {yard.get('change_round')}, paired)")
        for env, score in sorted(yard["envs"].items()):
            lines.append(f"  {env:<28} {interval_text(score)}")
    lines += public_lines(data.get("last_public_yardstick"))
    lines += public_lines(data.get("last_public_tau2"))
    rates = data.get("last_pass_rates") or {}
    if rates:
        lines.append(f"fresh tasks ({data.get('last_pass_rates_tool_view') or 'tool view not recorded'}):")
    judge = data.get("last_pass_rates_judge") or {}
    for env, rate in sorted(rates.items()):
        lines.append(
            f"  {env:<28} pass rate {rate:.2f}" + (judge_text(judge) if env in judge.get("envs", []) else "")
        )
    publish = data.get("last_publish")
    if publish:
        lines.append(
            f"publish:    {publish['policy']}" + (f" ({publish['reason']})" if publish.get("reason") else "")
        )
    lines += _render_replicas(data.get("replicas") or {})
    lines += _render_cluster(data.get("cluster") or {})
    cur = data.get("curriculum") or {}
    if cur.get("environments"):
        lines.append(
            f"curriculum: {cur['environments']} environments, mean difficulty {cur['mean_difficulty']}"
        )
    return "\n".join(lines)


def _render_replicas(replicas: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The http model servers of each role, when a role has more than one."""
    lines = []
    for role, servers in sorted(replicas.items()):
        if len(servers) < 2:
            continue
        serving = sum(1 for r in servers if r.get("serving"))
        lines.append(f"{role + ':':<11} {serving}/{len(servers)} replicas serving")
        for r in servers:
            state = {True: "serving", False: f"ejected: {r.get('reason', '')[:80]}", None: "not used yet"}
            lines.append(f"  {r['url']:<28} {state[r.get('serving')]}")
    return lines


def _render_cluster(cluster: dict[str, Any]) -> list[str]:
    """Where episodes run, in cluster mode only: a local daemon's status stays as it was."""
    if cluster.get("backend") != "ray":
        return []
    nodes, workers = cluster.get("nodes") or [], cluster.get("workers") or []
    alive = sum(1 for n in nodes if n.get("alive"))
    lost = cluster.get("workers_lost") or []
    starting = cluster.get("workers_starting") or 0
    lines = [
        f"cluster:    ray at {cluster.get('address')}  nodes {alive}/{len(nodes)} alive",
        f"workers:    {len(workers)} ready"
        + (f", {starting} starting" if starting else "")
        # Lost workers' in-flight episodes ran again elsewhere; committed ones are never redone.
        + f", {len(lost)} lost, {cluster.get('episodes_rescheduled', 0)} episodes rescheduled",
    ]
    for w in workers:
        lines.append(
            f"  {w['worker']:<28} {w.get('episodes', 0)} episodes, {w.get('in_flight', 0)} in flight"
        )
    return lines


def judge_text(judge: dict[str, Any]) -> str:
    """`  (judge-scored: agreement 0.62)` beside a pass rate the helper's judge decided."""
    if judge.get("agreement") is None:
        return "  (judge-scored; judge not measured)"
    return (
        f"  (judge-scored: agreement {judge['agreement']:.2f}, false-pass {judge.get('false_pass') or 0:.2f})"
    )


def public_lines(public: dict[str, Any] | None, label: str = "public:", indent: str = "  ") -> list[str]:
    """A public benchmark (BFCL, τ²) as text: accuracy overall and per category, or why it did not run."""
    if not public:
        return []
    name = f"{public.get('benchmark', 'bfcl')} {public.get('version') or ''}".strip()
    if public.get("state") != "measured":
        return [f"{label:<11} {name} {public.get('state')}: {public.get('note', '')}"[:160]]
    reused = public.get("reused_from")
    note = f", reused from round {reused['round']} {reused['stage']}" if reused else ""
    judge = public.get("judge")
    if judge:
        agreement = judge.get("agreement")
        note += ", judge " + (f"agreement {agreement:.2f}" if agreement is not None else "not measured")
    lines = [
        f"{label:<11} {interval_text(public.get('overall'))}  {name}, policy {public.get('policy')}{note}"
    ]
    for cat, score in (public.get("categories") or {}).items():
        lines.append(f"{indent}{cat:<28} {interval_text(score)}")
    return lines


def interval_text(score: dict[str, Any] | None) -> str:
    """`0.50 [0.19, 0.81] (3/6)`: a pass rate with its 95% interval and counts."""
    if not score or not score.get("n"):
        return "-"
    return f"{score['rate']:.2f} [{score['low']:.2f}, {score['high']:.2f}] ({score['passed']}/{score['n']})"
