"""The document served at /status (and printed by `arena status`), and the snapshot it is served from.

The admin API answers on a thread of its own (`ops.admin_server`), so that a scrape never waits
for the round's work on the daemon's event loop. That thread never reads the store: the daemon
builds the store's part of the document on its own loop (`keep_fresh`: every
`REFRESH_INTERVAL_S` and as soon as a phase commits) into a `StatusSnapshot`, and a request
serves that snapshot with the run state (round, phase, pause, progress) read live from the
daemon's plain attributes. `as_of` and `age_s` say how old the store's part is.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from arena.store import repo

if TYPE_CHECKING:
    from ops.daemon_view import RunState

log = structlog.get_logger(__name__)

# The store's figures change when a phase commits (which refreshes at once); the interval only
# bounds how stale anything else may get (replicas, the cluster, a store edited from outside).
REFRESH_INTERVAL_S = 5.0


def starting_document(daemon: RunState, version: str) -> dict[str, Any]:
    """Start-up (sandbox probe, migrations): the store may have no tables yet; say what is known."""
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


async def status_document(daemon: RunState, version: str) -> dict[str, Any]:
    """Round, phase, pause state, progress, the last round's figures and the curriculum summary,
    all read now (the admin API serves `StatusSnapshot.document` instead).

    The last completed round's yardstick (overall and per environment, with 95% intervals) and its
    publish decision come from the phase outputs; `last_pass_rates` are the fresh tasks', measured
    with the tool view `last_pass_rates_tool_view` names.
    """
    if not daemon.ready:
        return starting_document(daemon, version)
    return await full_document(daemon, version)


async def full_document(daemon: RunState, version: str) -> dict[str, Any]:
    """The whole document read from the store now, whether or not the daemon is ready yet."""
    from ops.report import tool_view
    from ops.yardstick_history import read_latest

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
        # BFCL multi-turn and τ²-bench, each by its own rules; `state` says why one was not measured.
        "last_public_yardstick": _public(public),
        "last_public_tau2": _public(evaluate.get("public_tau2") or None),
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


def live_fields(daemon: RunState) -> dict[str, Any]:
    """The run state, read from the daemon's plain attributes.

    Only the daemon's loop assigns them, each as a whole value, so another thread reading them
    (under the GIL) sees an old or a new value, never a torn one.
    """
    return {
        "round": daemon.round,
        "phase": daemon.phase,
        "paused": daemon.paused,
        "paused_since": daemon.paused_since,
        "pause_reason": daemon.pause_reason,
        "stopping": daemon.stopping,
        "ready": daemon.ready and daemon.models_up,
        "sandbox": daemon.sandbox,
        "progress": daemon.progress_state,
        "rounds_completed_this_run": daemon.rounds_completed,
    }


class StatusSnapshot:
    """The last document the daemon built on its loop, served by the admin thread without the store.

    `publish` runs on the daemon's loop, `document` on the admin thread: the two share one tuple,
    replaced whole, so no lock is needed.
    """

    def __init__(self, version: str) -> None:
        self.version = version
        self._latest: tuple[dict[str, Any], float] | None = None  # (document, wall-clock time)
        self._wake: anyio.Event | None = None

    def publish(self, document: dict[str, Any]) -> None:
        """Replace the snapshot (daemon's loop)."""
        self._latest = (document, time.time())

    def poke(self) -> None:
        """Ask `keep_fresh` for a refresh now (daemon's loop: a phase committed, the pause changed)."""
        if self._wake is not None:
            self._wake.set()

    def document(self, daemon: RunState) -> dict[str, Any]:
        """The /status document: the snapshot, the run state read now, and how old the snapshot is."""
        latest = self._latest
        if latest is None:  # start-up: a pause may already have come (and says why)
            return {**starting_document(daemon, self.version), "pause_reason": daemon.pause_reason}
        document, at = latest
        return {
            **document,
            **live_fields(daemon),
            "as_of": datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds"),
            "age_s": round(max(0.0, time.time() - at), 3),
        }

    async def refresh(self, daemon: RunState) -> bool:
        """Read the store's figures now and publish them (daemon's loop). A failure keeps the
        previous snapshot (its `as_of` shows its age) and returns False."""
        try:
            self.publish(await full_document(daemon, self.version))
        except Exception as exc:  # a busy or restarting store must not stop the daemon or the refreshes
            log.warning("status.refresh_failed", error=f"{type(exc).__name__}: {exc}")
            return False
        return True

    async def keep_fresh(self, daemon: RunState) -> None:
        """Refresh every `REFRESH_INTERVAL_S` and when poked, once the daemon is ready."""
        self._wake = anyio.Event()
        while True:
            with anyio.move_on_after(REFRESH_INTERVAL_S):
                await self._wake.wait()
            self._wake = anyio.Event()  # before the refresh: a poke during it is not lost
            if daemon.ready:
                await self.refresh(daemon)


def _public(public: dict[str, Any] | None) -> dict[str, Any] | None:
    """A public benchmark's summary as `arena status` shows it."""
    keys = ("state", "note", "benchmark", "version", "policy", "overall", "categories", "reused_from")
    return {k: public.get(k) for k in keys} if public else None
