"""Publishing to several policy replicas against a mock fleet of vLLM reload endpoints (no model).

Every serving replica gets each update concurrently; one that cannot load it is ejected; the
publish fails only when none took it; an ejected replica gets the live weights before it returns,
and never returns in the middle of a publish with the weights being replaced. The same against
real `arena serve-model` processes is in tests/simulate/test_replicas.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from simulate.replicas import ReplicaPool
from trainer.publish import HttpWeightPublisher, PublishError
from trainer.publish_calls import LiveWeights

pytestmark = pytest.mark.anyio

A, B = "http://a.test", "http://b.test"


class FleetOfFakeVllm:
    """Mock vLLM reload endpoints on several hosts, recording (host, path, body) of each call."""

    def __init__(self, *hosts: str) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.reload_status = dict.fromkeys(hosts, 200)
        self.down: set[str] = set()
        self.gates: dict[str, anyio.Event] = {}  # a host's reload waits for its gate
        self.reloading: dict[str, anyio.Event] = {h: anyio.Event() for h in hosts}

    async def handle(self, request: httpx.Request) -> httpx.Response:
        host = f"{request.url.scheme}://{request.url.host}"
        if host in self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if request.method == "GET":
            return httpx.Response(200, json={"data": [{"id": "policy"}]})
        body = json.loads(request.content) if request.content else None
        self.calls.append((host, request.url.path, body))
        if request.url.path == "/collective_rpc":
            self.reloading[host].set()
            if host in self.gates:
                await self.gates[host].wait()
            return httpx.Response(self.reload_status[host], json={"error": {"message": "cannot load"}})
        return httpx.Response(200, json={})

    def paths(self, host: str) -> list[str]:
        return [path for h, path, _ in self.calls if h == host]

    def reloads(self, host: str) -> list[str]:
        return [
            Path(body["kwargs"]["weights_path"]).name
            for h, path, body in self.calls
            if h == host and body and "kwargs" in body
        ]


def checkpoint(tmp_path: Path, name: str = "ckpt") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(name.encode())
    return folder


def adapter(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    (folder / "adapter_model.safetensors").write_bytes(b"lora")
    return folder


def publisher(fleet: FleetOfFakeVllm, tmp_path: Path, **pool_options: Any) -> HttpWeightPublisher:
    transport = httpx.MockTransport(fleet.handle)
    pool = ReplicaPool([A, B], transport=transport, **pool_options)
    # Retries would be obvious (10 s backoff) if a test ever waited for one.
    return HttpWeightPublisher([A, B], tmp_path / "shared", transport=transport, pool=pool, backoff_s=10.0)


async def test_every_replica_loads_each_update_at_the_same_time(tmp_path: Path) -> None:
    fleet = FleetOfFakeVllm(A, B)
    fleet.gates[A] = anyio.Event()
    pub = publisher(fleet, tmp_path)

    async def release_a_once_b_reloads() -> None:
        await fleet.reloading[B].wait()  # B's reload started while A's is still running
        fleet.gates[A].set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_a_once_b_reloads)
            sync = await pub.publish(checkpoint(tmp_path), round_id=1, step=2)
    assert sync.kind == "full"
    for host in (A, B):
        assert fleet.paths(host) == ["/collective_rpc", "/reset_prefix_cache"]
        assert fleet.reloads(host) == ["round-0001-step-000002"]
    live = pub.pool.restore
    assert isinstance(live, LiveWeights) and live.full == tmp_path / "shared" / "round-0001-step-000002"


async def test_a_replica_that_cannot_load_an_update_is_dropped_and_the_publish_succeeds(
    tmp_path: Path,
) -> None:
    fleet = FleetOfFakeVllm(A, B)
    fleet.reload_status[B] = 400
    pub = publisher(fleet, tmp_path)
    with capture_logs() as logs:
        await pub.publish(checkpoint(tmp_path), round_id=1, step=2)
    assert pub.pool.replica(A).serving and not pub.pool.replica(B).serving
    assert "could not load the weights round-0001-step-000002" in pub.pool.replica(B).reason
    assert "HTTP 400" in pub.pool.replica(B).reason
    dropped = [e for e in logs if e["event"] == "weights.replica_dropped"]
    assert [e["replica"] for e in dropped] == [B]
    published = next(e for e in logs if e["event"] == "weights.published")
    assert published["replicas"] == [A]


async def test_the_publish_fails_only_when_no_replica_took_it_and_then_drops_none(tmp_path: Path) -> None:
    fleet = FleetOfFakeVllm(A, B)
    fleet.reload_status[A] = fleet.reload_status[B] = 400
    pub = publisher(fleet, tmp_path)
    with pytest.raises(PublishError) as caught:
        await pub.publish(checkpoint(tmp_path), round_id=1, step=2)
    message = str(caught.value)
    assert message.startswith("no policy replica took the weights round-0001-step-000002: ")
    assert f"{A}: POST {A}/collective_rpc failed: HTTP 400" in message and f"{B}: POST" in message
    # Both still serve what they served before, consistently: none is dropped, nothing is restored.
    assert all(r.serving for r in pub.pool.replicas) and pub.pool.restore is None


async def test_an_ejected_replica_is_skipped_while_down_and_given_all_live_weights_when_it_answers(
    tmp_path: Path,
) -> None:
    fleet = FleetOfFakeVllm(A, B)
    pub = publisher(fleet, tmp_path)
    pub.pool.eject(pub.pool.replica(B), "connection lost")
    fleet.down.add(B)
    with anyio.fail_after(5):  # no retries to a replica that does not answer its probe
        await pub.publish(checkpoint(tmp_path), round_id=1, step=0)
    assert fleet.paths(B) == [] and not pub.pool.replica(B).serving

    fleet.down.clear()  # B is back (a restarted process: it serves its starting weights)
    sync = await pub.publish_adapter(adapter(tmp_path, "a1"), round_id=1, step=1)
    assert fleet.paths(A)[-1:] == ["/v1/load_lora_adapter"]  # A had the full weights: the adapter only
    assert fleet.paths(B) == ["/collective_rpc", "/reset_prefix_cache", "/v1/load_lora_adapter"]
    assert fleet.reloads(B) == ["round-0001-step-000000"]  # the round's full weights, then the adapter
    assert pub.pool.replica(B).serving and sync.served_model == "policy-lora-r0001-s000001"


async def test_a_returning_replica_gets_the_full_weights_and_the_adapter_served_now(tmp_path: Path) -> None:
    now = [0.0]
    fleet = FleetOfFakeVllm(A, B)
    pub = publisher(fleet, tmp_path, clock=lambda: now[0], cooldown_s=30)
    await pub.publish(checkpoint(tmp_path), round_id=2, step=0)
    await pub.publish_adapter(adapter(tmp_path, "a1"), round_id=2, step=1)
    pub.pool.eject(pub.pool.replica(A), "connection lost")
    fleet.calls.clear()
    now[0] = 31.0
    await pub.pool.check_due()
    assert pub.pool.replica(A).serving
    assert [(p, b) for h, p, b in fleet.calls if h == A] == [
        ("/collective_rpc", {"method": "reload_weights", "args": [], "kwargs": {"weights_path": str(tmp_path / "shared" / "round-0002-step-000000")}}),
        ("/reset_prefix_cache", None),
        ("/v1/load_lora_adapter", {"lora_name": "policy-lora-r0002-s000001", "lora_path": str(tmp_path / "shared" / "policy-lora-r0002-s000001")}),
    ]  # fmt: skip
    assert fleet.paths(B) == []


async def test_no_replica_returns_mid_publish_with_the_weights_being_replaced(tmp_path: Path) -> None:
    now = [0.0]
    fleet = FleetOfFakeVllm(A, B)
    pub = publisher(fleet, tmp_path, clock=lambda: now[0], cooldown_s=30)
    await pub.publish(checkpoint(tmp_path, "v1"), round_id=1, step=0)
    pub.pool.eject(pub.pool.replica(B), "connection lost")
    fleet.down.add(B)
    fleet.calls.clear()
    fleet.gates[A] = anyio.Event()
    fleet.reloading[A] = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def publish_v2() -> None:
                await pub.publish(checkpoint(tmp_path, "v2"), round_id=1, step=1)

            tg.start_soon(publish_v2)
            await fleet.reloading[A].wait()  # the publish of v2 is under way (B was down: skipped)
            fleet.down.clear()
            now[0] = 31.0
            tg.start_soon(pub.pool.check_due)  # a request finds B due: probe, then restore
            await anyio.sleep(0.1)
            assert not pub.pool.replica(B).serving and fleet.reloads(B) == []  # waits for the publish
            fleet.gates[A].set()
    assert fleet.reloads(B) == ["round-0001-step-000001"]  # v2, not the v1 being replaced
    assert pub.pool.replica(B).serving
