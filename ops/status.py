"""The document served at /status (and printed by `arena status`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arena.store import repo

if TYPE_CHECKING:
    from ops.daemon import Daemon


async def status_document(daemon: Daemon, version: str) -> dict[str, Any]:
    """Round, phase, pause state, progress, the last round's figures and the curriculum summary.

    The last completed round's yardstick (overall and per environment, with 95% intervals) and its
    publish decision come from the phase outputs; `last_pass_rates` are the fresh tasks', measured
    with the tool view `last_pass_rates_tool_view` names.
    """
    from ops.report import tool_view
    from ops.yardstick_history import read_latest

    if not daemon.ready:
        # Start-up (sandbox probe, migrations): the store may have no tables yet; say what is known.
        return {
            "version": version,
            "round": None,
            "phase": None,
            "paused": daemon.paused,
            "paused_since": daemon.paused_since,
            "ready": False,
            "sandbox": daemon.sandbox,
            "progress": daemon.progress_state,
            "note": "starting: the store is not migrated yet",
        }
    async with daemon.store.transaction() as s:
        done = await repo.last_completed_round(s)
        rates = await repo.pass_rates(s, done.round) if done is not None else {}
        phases = await repo.get_phases(s, done.round) if done is not None else {}
        curriculum = await repo.curriculum_states(s)
        state = await repo.get_daemon_state(s)
        latest = await read_latest(s)
    difficulties = {env: round(c.difficulty, 4) for env, c in sorted(curriculum.items())}
    evaluate = phases["evaluate"].output if "evaluate" in phases else {}
    publish = phases["publish"].output if "publish" in phases else {}
    yard = evaluate.get("yardstick") or None
    public = evaluate.get("public_yardstick") or None
    return {
        "version": version,
        "round": daemon.round,
        "phase": daemon.phase,
        "paused": state.paused,
        "paused_since": repo.as_utc_iso(state.paused_since),
        "pause_reason": state.pause_reason,
        "stopping": daemon.stopping,
        "ready": daemon.ready and daemon.models_up,
        "sandbox": daemon.sandbox,
        "progress": daemon.progress_state,
        "rounds_completed_this_run": daemon.rounds_completed,
        "last_completed_round": done.round if done is not None else None,
        "last_pass_rates": rates or evaluate.get("pass_rates", {}),
        "last_pass_rates_tool_view": tool_view(evaluate.get("tool_subset")) if evaluate else None,
        # Which of those the helper's judge scored, and how far that judge was measured to agree.
        "last_pass_rates_judge": evaluate.get("judge"),
        "last_yardstick": {
            "policy": yard["policy"],
            "overall": yard["overall"],
            "envs": {env: levels.get("all") for env, levels in yard["envs"].items()},
            "reused_from": yard.get("reused_from"),
            # The newest measured round's change, paired over the same tasks (`ops.yardstick_history`).
            "change_round": latest.round if latest else None,
            "since_first": latest.since_first.model_dump() if latest and latest.since_first else None,
            "since_previous": latest.since_previous.model_dump()
            if latest and latest.since_previous
            else None,
        }
        if yard
        else None,
        # BFCL multi-turn, scored by BFCL's rules; `state` says why it was not measured.
        "last_public_yardstick": {
            k: public.get(k)
            for k in (
                "state",
                "note",
                "benchmark",
                "version",
                "policy",
                "overall",
                "categories",
                "reused_from",
            )
        }
        if public
        else None,
        "last_publish": {"policy": publish.get("policy"), "reason": (publish.get("gate") or {}).get("reason")}
        if publish
        else None,
        # Each http model role's servers: which serve, and why the others were ejected.
        "replicas": model_replicas(daemon.config),
        # Where episodes run: in the daemon (local) or on a Ray cluster's nodes and workers.
        "cluster": daemon.cluster.status() if daemon.cluster is not None else {"backend": "local"},
        "curriculum": {
            "environments": len(difficulties),
            "mean_difficulty": round(sum(difficulties.values()) / len(difficulties), 4)
            if difficulties
            else None,
            "difficulty": difficulties,
        },
    }


def model_replicas(config: Any) -> dict[str, list[dict[str, Any]]]:
    """Per http role, each replica's URL and state as this process's pool knows it.

    `serving` is None for a replica no request has reached yet (the pool is made on first use).
    """
    from simulate.replicas import find_shared_pool, server_root

    out: dict[str, list[dict[str, Any]]] = {}
    for role in ("policy", "helper"):
        section = getattr(config.models, role)
        if section.backend != "http" or not section.urls:
            continue
        pool = find_shared_pool(section.urls)
        if pool is None:
            out[role] = [{"url": server_root(u), "serving": None, "reason": ""} for u in section.urls]
            continue
        out[role] = [
            {"url": r.url, "serving": r.serving, "reason": r.reason, "in_flight": r.in_flight}
            for r in pool.replicas
        ]
    return out
