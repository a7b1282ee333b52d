"""The admin API on a thread of its own: GETs answer while the daemon's event loop is blocked, the
POSTs still act on the daemon (on its loop), /status says how old its snapshot is, /metrics is
rendered once per window, and a stopped daemon leaves no admin thread behind."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest

from ops.admin import SharedExposition
from ops.admin_server import THREAD_NAME, AdminServer
from ops.daemon import Daemon
from ops.status import StatusSnapshot

pytestmark = pytest.mark.anyio

BLOCK_S = 5.0  # how long the phase holds the daemon's loop


def _admin_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


async def test_gets_answer_while_the_daemons_loop_is_blocked(make_config, fakes, run_daemon) -> None:
    blocking = threading.Event()
    unblocked_at: list[float] = []

    class Blocking(fakes.StepPhase):
        async def run(self, ctx: Any) -> dict[str, Any]:
            blocking.set()
            # Holds the daemon's loop, as work that never reaches a checkpoint does.
            time.sleep(BLOCK_S)  # noqa: ASYNC251 - blocking the loop is the point
            unblocked_at.append(time.monotonic())
            return await super().run(ctx)

    phases = fakes.fake_phases(steps=2)
    phases[1] = Blocking("diagnose", steps=2)
    daemon = Daemon(make_config(), phases=phases, handle_signals=False)

    def scrape(base: str) -> dict[str, Any]:
        # A thread of its own: the test's async client would wait on the blocked loop too.
        assert blocking.wait(120), "the blocking phase never started"
        with httpx.Client(base_url=base, timeout=BLOCK_S * 4) as client:
            started = time.monotonic()
            status, metrics, health = client.get("/status"), client.get("/metrics"), client.get("/healthz")
            answered = time.monotonic()
            pause = client.post("/pause", json={"reason": "while blocked"})  # needs the daemon's loop
            return {
                "status": status,
                "metrics": metrics,
                "health": health,
                "took": answered - started,
                "answered": answered,
                "pause": pause,
                "paused_at": time.monotonic(),
            }

    async with run_daemon(daemon) as client:
        got = await anyio.to_thread.run_sync(scrape, str(client.base_url))
        assert got["answered"] < unblocked_at[0], "the GETs waited for the daemon's loop"
        assert got["took"] < 2.0  # generous: the loop was blocked for BLOCK_S
        doc = got["status"].json()
        assert doc["phase"] == "diagnose" and doc["round"] == 1 and doc["paused"] is False
        assert {"as_of", "age_s", "last_pass_rates", "curriculum", "last_completed_round"} <= set(doc)
        assert "arena_phase" in got["metrics"].text and got["health"].json() == {"ok": True}
        # The POST went through the daemon's loop: it answered once the loop was free, and took effect.
        assert got["pause"].status_code == 200 and got["pause"].json()["paused"] is True
        assert got["paused_at"] >= unblocked_at[0] and daemon.paused
        status = (await client.get("/status")).json()
        assert status["paused"] is True and status["pause_reason"] == "while blocked"
        # A long timeout: the POST waits for the daemon's loop, slow on a loaded machine.
        assert (await client.post("/stop", timeout=120)).status_code == 200
    assert not _admin_threads(), "the admin thread outlived the daemon"
    assert daemon.admin is not None and daemon.admin.sock is not None and daemon.admin.sock.fileno() == -1


async def test_status_snapshot_follows_the_rounds(make_config, fakes, run_daemon, until) -> None:
    daemon = Daemon(make_config(), phases=fakes.fake_phases(steps=2), max_rounds=2, handle_signals=False)
    async with run_daemon(daemon) as client:
        await until(lambda: daemon.rounds_completed >= 1, 120)
        await until(lambda: (daemon.status_snapshot.document(daemon).get("last_completed_round") or 0) >= 1)
        doc = (await client.get("/status")).json()
        assert doc["last_completed_round"] >= 1 and doc["age_s"] >= 0
    assert not _admin_threads()


def test_snapshot_before_and_after_the_first_refresh() -> None:
    daemon = SimpleNamespace(
        round=3, phase="train", paused=True, paused_since="2026-11-27T10:00:00+00:00", pause_reason="x",
        stopping=False, ready=True, models_up=True, sandbox={"available": True}, progress_state={"done": 1},
        rounds_completed=2,
    )  # fmt: skip
    snapshot = StatusSnapshot("0.1.0")
    early = snapshot.document(daemon)  # type: ignore[arg-type]
    assert early["ready"] is False and "not migrated" in early["note"] and "as_of" not in early
    snapshot.publish({"version": "0.1.0", "round": 1, "phase": None, "paused": False, "curriculum": {}})
    doc = snapshot.document(daemon)  # type: ignore[arg-type]
    # The run state is read live over the snapshot; the store's figures come from it.
    assert (doc["round"], doc["phase"], doc["paused"], doc["pause_reason"]) == (3, "train", True, "x")
    assert doc["curriculum"] == {} and doc["as_of"].endswith("+00:00") and doc["age_s"] >= 0


def test_metrics_exposition_is_shared_within_its_window() -> None:
    renders: list[int] = []

    def render() -> bytes:
        renders.append(1)
        return f"n {len(renders)}\n".encode()

    shared = SharedExposition(render, max_age_s=3600)
    assert shared.body() == shared.body() == b"n 1\n" and len(renders) == 1
    fresh = SharedExposition(render, max_age_s=0)
    assert fresh.body() != fresh.body()


def test_a_busy_port_is_a_clear_error(make_config) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        config = make_config(ARENA_ADMIN__ADDRESS=f"127.0.0.1:{port}")
        server = AdminServer(Daemon(config, phases=[], handle_signals=False), config.admin)
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            server.bind()


async def test_kept_alive_scrapes_are_sent_without_nagle(make_config, fakes, run_daemon, until) -> None:
    """Prometheus keeps its connection open between scrapes: with Nagle's algorithm on the
    server's side, each answer on such a connection waited ~40 ms for the client's delayed ACK."""
    daemon = Daemon(make_config(), phases=fakes.fake_phases(steps=2), max_rounds=1, handle_signals=False)
    async with run_daemon(daemon) as client:
        await until(lambda: daemon.rounds_completed >= 1, 120)
        assert daemon.admin is not None and daemon.admin.server is not None
        answers = [await client.get(path) for path in ("/metrics", "/status", "/metrics", "/status")]
        assert all(a.status_code == 200 for a in answers)
        connections = daemon.admin.server.server_state.connections
        sockets = [c.transport.get_extra_info("socket") for c in connections]
        assert sockets, "the client's connection was not kept alive"
        assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)
        # The scraped GETs skip Starlette's routing: same headers and bodies as the routes had.
        metrics, status = answers[2], answers[3]
        assert metrics.headers["content-type"].startswith("text/plain") and "arena_phase" in metrics.text
        assert status.headers["content-type"] == "application/json" and status.json()["round"] >= 1
        assert int(status.headers["content-length"]) == len(status.content)
        head = await client.head("/metrics")
        assert head.status_code == 200 and head.content == b""
        assert (await client.get("/nothing")).status_code == 404
