"""Admin API: token on changing endpoints, refusal to expose without a token, readiness, metrics."""

from __future__ import annotations

import re
import shutil

import anyio
import httpx
import pytest

from ops.admin import AdminExposureError, build_app
from ops.cli import main
from ops.daemon import Daemon

pytestmark = pytest.mark.anyio


async def test_changing_endpoints_need_the_token(make_config, fakes, run_daemon, until) -> None:
    config = make_config(ARENA_ADMIN_TOKEN="s3cret", ARENA_DAEMON__LAST_ROUND="1")
    daemon = Daemon(config, phases=fakes.fake_phases(steps=500), handle_signals=False)
    async with run_daemon(daemon) as client:
        assert (await client.get("/healthz")).json() == {"ok": True}
        for path in ("/pause", "/resume", "/stop"):
            resp = await client.post(path)
            assert resp.status_code == 401, path
            assert resp.headers["www-authenticate"] == "Bearer"
        assert (await client.post("/pause", headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert not daemon.paused and not daemon.stopping
        auth = {"Authorization": "Bearer s3cret"}
        bad = await client.post("/pause", headers=auth, content=b"{not json")
        assert bad.status_code == 400 and "not JSON" in bad.json()["error"]
        assert (await client.get("/pause")).status_code == 405
        await until(lambda: daemon.ready)
        ok = await client.post("/pause", headers=auth)
        assert ok.status_code == 200 and daemon.paused
        status = (await client.get("/status")).json()
        assert {"round", "phase", "paused", "progress", "last_pass_rates", "curriculum"} <= set(status)
        await client.post("/stop", headers=auth)


async def test_changing_endpoints_wait_for_the_store(make_config, fakes) -> None:
    """A pause before the store is migrated waits for it, then is refused with 503 and Retry-After."""
    daemon = Daemon(make_config(), phases=fakes.fake_phases(steps=1), handle_signals=False)  # not started

    async def on_daemon(fn, *args):  # type: ignore[no-untyped-def]
        raise AssertionError(f"{fn.__name__} reached the daemon before it was ready")

    app = build_app(daemon, None, on_daemon, ready_wait_s=0.2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://admin") as client:
        for path in ("/pause", "/resume", "/stop"):
            resp = await client.post(path)
            assert resp.status_code == 503, path
            assert resp.headers["retry-after"] == "1" and "starting" in resp.json()["error"]
        assert (await client.get("/readyz")).status_code == 503
    assert not daemon.paused and not daemon.stopping


def test_refuses_public_address_without_token(make_config, capsys, monkeypatch, tmp_path) -> None:
    with pytest.raises(AdminExposureError, match="ARENA_ADMIN_TOKEN"):
        Daemon(make_config(ARENA_ADMIN__ADDRESS="0.0.0.0:8787"))
    Daemon(make_config(ARENA_ADMIN__ADDRESS="0.0.0.0:8787", ARENA_ADMIN_TOKEN="t"))  # with a token: fine
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARENA_ADMIN__ADDRESS", "0.0.0.0:8787")
    monkeypatch.delenv("ARENA_ADMIN_TOKEN", raising=False)
    assert main(["run", "--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve the admin API on 0.0.0.0:8787 without a token" in err
    assert "Traceback" not in err


async def test_readyz_false_while_model_backend_unreachable(make_config, fakes, run_daemon, until) -> None:
    config = make_config(
        ARENA_MODELS__POLICY__BACKEND="http",
        ARENA_MODELS__POLICY__BASE_URL="http://127.0.0.1:9/v1",
        ARENA_TRAINER__BASE_MODEL="/srv/models/policy",
    )
    daemon = Daemon(config, phases=fakes.fake_phases(steps=500), handle_signals=False)
    async with run_daemon(daemon) as client:
        await until(lambda: daemon.ready)
        await until(
            lambda: (
                'arena_model_backend_up{backend="http",role="policy"} 0.0'
                in daemon.metrics.exposition().decode()
            )
        )
        resp = await client.get("/readyz")
        assert resp.status_code == 503 and resp.json()["models"] is False
        await client.post("/stop")


async def test_no_sandbox_boundary_is_said_at_start_readyz_and_status(
    make_config, fakes, run_daemon, until, monkeypatch
) -> None:
    from arena.sandbox.boundary import probe
    from ops.commands.admin import _render_status

    monkeypatch.setenv("ARENA_BWRAP", "/nonexistent/bwrap")
    probe.cache_clear()
    try:
        daemon = Daemon(make_config(), phases=fakes.fake_phases(steps=500), handle_signals=False)
        async with run_daemon(daemon) as client:
            await until(lambda: daemon.ready)
            sandbox = (await client.get("/readyz")).json()["sandbox"]
            assert sandbox["available"] is False and "bubblewrap" in sandbox["detail"]
            status = (await client.get("/status")).json()
            assert "UNAVAILABLE, synthesized environments refused: bubblewrap" in _render_status(status)
            await client.post("/stop")
    finally:
        probe.cache_clear()


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="scripts/install-test-tools.sh installs promtool"
)
async def test_live_metrics_pass_promtool(make_config, fakes, run_daemon, until) -> None:
    daemon = Daemon(make_config(), phases=fakes.fake_phases(steps=50), handle_signals=False)
    async with run_daemon(daemon) as client:
        await until(lambda: daemon.rounds_completed >= 1)
        text = (await client.get("/metrics")).text
        await client.post("/stop")
    rounds = re.search(r"^arena_rounds_total (\S+)$", text, re.M)
    assert rounds is not None and float(rounds.group(1)) >= 1
    assert re.search(r'^arena_episodes_total\{environment="other",finish="stop"\} [1-9]', text, re.M)
    result = await anyio.run_process(["promtool", "check", "metrics"], input=text.encode(), check=False)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()


async def test_cli_clients(make_config, fakes, run_daemon, until, monkeypatch, capsys) -> None:
    config = make_config(ARENA_ADMIN_TOKEN="s3cret")
    daemon = Daemon(config, phases=fakes.fake_phases(steps=500), handle_signals=False)

    async def cli(*argv: str) -> int:
        # The clients are synchronous: run them off the event loop that serves the daemon.
        return await anyio.to_thread.run_sync(main, list(argv))

    async with run_daemon(daemon) as client:
        url = str(client.base_url)
        monkeypatch.setenv("ARENA_ADMIN_TOKEN", "wrong")
        assert await cli("pause", "--url", url) == 2
        assert "refused the admin token" in capsys.readouterr().err
        monkeypatch.setenv("ARENA_ADMIN_TOKEN", "s3cret")
        assert await cli("pause", "--url", url, "--reason", "upgrade") == 0
        assert capsys.readouterr().out.strip().splitlines()[-1] == "paused"
        assert await cli("status", "--url", url) == 0
        out = capsys.readouterr().out
        assert "paused since" in out and "upgrade" in out
        assert await cli("resume", "--url", url) == 0
        assert await cli("stop", "--url", url) == 0
    assert await cli("status", "--url", url) == 2
    assert "no daemon answering" in capsys.readouterr().err


def test_status_prints_the_cluster_in_cluster_mode() -> None:
    from ops.commands.admin import _render_status

    cluster = {
        "backend": "ray",
        "address": "arena-ray-head-svc:6379",
        "nodes": [
            {"node": "a1b2c3d4e5f6", "address": "10.0.0.5", "alive": True, "cpus": 0},
            {"node": "b2c3d4e5f6a1", "address": "10.0.0.6", "alive": True, "cpus": 8},
            {"node": "c3d4e5f6a1b2", "address": "10.0.0.7", "alive": False, "cpus": 8},
        ],
        "workers": [
            {"worker": "b2c3d4e5f6a1/101", "in_flight": 2, "episodes": 40},
            {"worker": "b2c3d4e5f6a1/102", "in_flight": 0, "episodes": 38},
        ],
        "workers_starting": 1,
        "workers_lost": ["c3d4e5f6a1b2/201"],
        "episodes_rescheduled": 3,
    }
    out = _render_status({"round": 4, "phase": "evaluate", "cluster": cluster}).splitlines()
    assert "cluster:    ray at arena-ray-head-svc:6379  nodes 2/3 alive" in out
    assert "workers:    2 ready, 1 starting, 1 lost, 3 episodes rescheduled" in out
    assert "  b2c3d4e5f6a1/101             40 episodes, 2 in flight" in out
    assert "  b2c3d4e5f6a1/102             38 episodes, 0 in flight" in out
    # One machine: nothing about a cluster, as before cluster mode existed.
    local = _render_status({"round": 4, "phase": "evaluate", "cluster": {"backend": "local"}})
    assert "cluster" not in local and "workers" not in local


def test_status_shows_each_policy_replica_and_why_one_is_out(make_config, tmp_path) -> None:
    from ops.commands.admin import _render_status
    from ops.status import model_replicas
    from simulate.replicas import shared_pool

    urls = ["http://127.0.0.1:18001/v1", "http://127.0.0.1:18002/v1"]
    config = make_config(
        ARENA_MODELS__POLICY__BACKEND="http",
        ARENA_MODELS__POLICY__BASE_URL=urls[0],
        ARENA_MODELS__POLICY__REPLICA_URLS=urls[1],
        ARENA_TRAINER__BASE_MODEL=str(tmp_path),
    )
    assert [r["serving"] for r in model_replicas(config)["policy"]] == [None, None]  # no request yet
    pool = shared_pool(urls, role="policy")
    pool.eject(pool.replicas[1], "could not load the live weights: 404")
    replicas = model_replicas(config)
    assert "helper" not in replicas  # a local helper has no servers to list
    out = _render_status({"round": 2, "phase": "train", "replicas": replicas}).splitlines()
    assert "policy:     1/2 replicas serving" in out
    assert "  http://127.0.0.1:18001       serving" in out
    assert "  http://127.0.0.1:18002       ejected: could not load the live weights: 404" in out
