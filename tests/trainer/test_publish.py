"""Weight publishing: the HTTP publisher against a fake recording vLLM server, the local one."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from structlog.testing import capture_logs

from trainer.publish import COPY_MARK, HttpWeightPublisher, LocalWeightPublisher, PublishError

ADAPTER_PATHS = ("/v1/load_lora_adapter", "/v1/unload_lora_adapter")


def list_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


class FakeVllmServer:
    """A recording stand-in for vLLM's reload endpoints (vLLM cannot run here)."""

    def __init__(self, *, fail_first: int = 0, status: int = 500) -> None:
        self.requests: list[tuple[str, dict | None, str | None]] = []
        self.fail_first = fail_first
        self.status = status
        self.weights_seen: list[list[str]] = []
        self.unknown_adapters: set[str] = set()  # unloading these answers 404 (a restarted server)
        self.listed: list[str] = ["policy"]  # what GET /v1/models lists

    async def handle(self, request: Request) -> JSONResponse:
        body = await request.json() if await request.body() else None
        self.requests.append((request.url.path, body, request.headers.get("authorization")))
        if request.url.path == ADAPTER_PATHS[1] and body and body["lora_name"] in self.unknown_adapters:
            return JSONResponse({"error": {"message": "not found"}}, status_code=404)
        if self.fail_first > 0:
            self.fail_first -= 1
            return JSONResponse({"error": "not ready"}, status_code=self.status)
        if body and "kwargs" in body:  # what the server would load: the folder must be complete now
            folder = Path(body["kwargs"]["weights_path"])
            self.weights_seen.append(list_names(folder))
        return JSONResponse({"ok": True})

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": n} for n in self.listed]})

    def app(self) -> Starlette:
        posts = [
            Route(p, self.handle, methods=["POST"])
            for p in ("/collective_rpc", "/reset_prefix_cache", *ADAPTER_PATHS)
        ]
        return Starlette(routes=[*posts, Route("/v1/models", self.models, methods=["GET"])])


async def serve(fake: FakeVllmServer, task_group: anyio.abc.TaskGroup) -> tuple[str, uvicorn.Server]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(fake.app(), log_level="warning", lifespan="off"))
    task_group.start_soon(server.serve, [sock])
    with anyio.fail_after(10):
        while not server.started:  # noqa: ASYNC110  (uvicorn has no started event to wait on)
            await anyio.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server


def checkpoint(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "config.json").write_text("{}")
    # A LoRA checkpoint's adapter, kept for resuming training: the server has no use for it.
    (folder / "adapter").mkdir()
    (folder / "adapter" / "adapter_model.safetensors").write_bytes(b"adapter")
    return folder


@pytest.mark.anyio
async def test_http_publisher_shares_the_folder_then_asks_for_a_reload(tmp_path: Path) -> None:
    fake = FakeVllmServer(fail_first=1)
    async with anyio.create_task_group() as tg:
        url, server = await serve(fake, tg)
        publisher = HttpWeightPublisher(url + "/v1", tmp_path / "shared", api_key="s3cret", backoff_s=0.01)
        await publisher.publish(checkpoint(tmp_path), round_id=3, step=12)
        server.should_exit = True
    shared = tmp_path / "shared" / "round-0003-step-000012"
    assert (shared / "model.safetensors").read_bytes() == b"weights"
    paths = [r[0] for r in fake.requests]
    assert paths == ["/collective_rpc", "/collective_rpc", "/reset_prefix_cache"]  # one retry after the 500
    body = fake.requests[1][1]
    assert body == {"method": "reload_weights", "args": [], "kwargs": {"weights_path": str(shared)}}
    assert fake.weights_seen == [[COPY_MARK, "config.json", "model.safetensors"]]  # no adapter/
    assert all(r[2] == "Bearer s3cret" for r in fake.requests)


@pytest.mark.anyio
async def test_publishing_the_same_checkpoint_again_reloads_without_copying(tmp_path: Path) -> None:
    fake = FakeVllmServer()
    source = checkpoint(tmp_path)
    shared = tmp_path / "shared" / "round-0003-step-000012"
    async with anyio.create_task_group() as tg:
        url, server = await serve(fake, tg)
        publisher = HttpWeightPublisher(url, tmp_path / "shared", backoff_s=0.01)
        with capture_logs() as logs:
            await publisher.publish(source, round_id=3, step=12)
            first_copy = (shared / "model.safetensors").stat().st_mtime_ns
            await publisher.publish(source, round_id=3, step=12)  # EVALUATE: the live policy again
            assert (shared / "model.safetensors").stat().st_mtime_ns == first_copy
            (source / "model.safetensors").write_bytes(b"retrained")  # same name, other weights
            await publisher.publish(source, round_id=3, step=12)
        server.should_exit = True
    assert [e["copied"] for e in logs if e["event"] == "weights.published"] == [True, False, True]
    assert (shared / "model.safetensors").read_bytes() == b"retrained"
    assert [r[0] for r in fake.requests].count("/collective_rpc") == 3  # every publish reloads


@pytest.mark.anyio
async def test_http_publisher_reports_a_refusal_without_retrying(tmp_path: Path) -> None:
    fake = FakeVllmServer(fail_first=5, status=404)
    async with anyio.create_task_group() as tg:
        url, server = await serve(fake, tg)
        publisher = HttpWeightPublisher(url, tmp_path / "shared", backoff_s=0.01)
        with pytest.raises(PublishError, match="HTTP 404"):
            await publisher.publish(checkpoint(tmp_path), round_id=0, step=1)
        server.should_exit = True
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_http_publisher_keeps_only_the_newest_copies_once_the_server_has_reloaded(
    tmp_path: Path,
) -> None:
    fake = FakeVllmServer()
    source = checkpoint(tmp_path)
    shared = tmp_path / "shared"
    async with anyio.create_task_group() as tg:
        url, server = await serve(fake, tg)
        publisher = HttpWeightPublisher(url, shared, keep=2, backoff_s=0.01)
        for round_id, step in [(1, 9), (2, 3), (2, 6), (10, 1)]:  # round 10 sorts after round 2
            await publisher.publish(source, round_id=round_id, step=step)
        assert list_names(shared) == ["round-0002-step-000006", "round-0010-step-000001"]
        # A refused reload deletes nothing: the server may still be reading the older copies.
        fake.fail_first, fake.status = 1, 400
        with pytest.raises(PublishError):
            await publisher.publish(source, round_id=11, step=1)
        server.should_exit = True
    assert list_names(shared) == [
        "round-0002-step-000006",
        "round-0010-step-000001",
        "round-0011-step-000001",
    ]
    with pytest.raises(ValueError, match="keep must be at least 1"):
        HttpWeightPublisher(url, shared, keep=0)


@pytest.mark.anyio
async def test_http_publisher_rejects_a_folder_without_weights(tmp_path: Path) -> None:
    publisher = HttpWeightPublisher("http://127.0.0.1:9", tmp_path / "shared")
    with pytest.raises(PublishError, match="no safetensors"):
        await publisher.publish(tmp_path, round_id=0, step=1)
    with pytest.raises(ValueError, match="http"):
        HttpWeightPublisher("vllm:8000", tmp_path)


class RecordingTarget:
    """Scripted local model: records the folders it is asked to load."""

    def __init__(self) -> None:
        self.loaded: list[Path] = []

    def load_weights(self, path: str | Path) -> None:
        self.loaded.append(Path(path))


@pytest.mark.anyio
async def test_local_publisher_loads_into_the_target(tmp_path: Path) -> None:
    target = RecordingTarget()
    publisher = LocalWeightPublisher(target)
    folder = checkpoint(tmp_path)
    await publisher.publish(folder, round_id=1, step=2)
    assert target.loaded == [folder] and publisher.published == [(folder, 1, 2)]


def adapter(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text('{"r": 8}')
    (folder / "adapter_model.safetensors").write_bytes(b"a" * 1000)
    return folder


@pytest.mark.anyio
async def test_adapter_sync_loads_each_steps_adapter_then_unloads_the_one_before(tmp_path: Path) -> None:
    fake = FakeVllmServer()
    async with anyio.create_task_group() as tg:
        url, server = await serve(fake, tg)
        publisher = HttpWeightPublisher(url + "/v1", tmp_path / "shared", backoff_s=0.01)
        first = await publisher.publish_adapter(adapter(tmp_path, "a1"), round_id=2, step=1)
        fake.unknown_adapters.add(first.served_model or "")  # the server lost it (a restart): still fine
        second = await publisher.publish_adapter(adapter(tmp_path, "a2"), round_id=2, step=2)
        # An adapter an earlier round's publisher left loaded (a crash): listed, so unloaded too.
        fake.listed = ["policy", "policy-lora-r0001-s000008", str(second.served_model)]
        full = await publisher.publish(
            checkpoint(tmp_path), round_id=3, step=0
        )  # the next round's full weights
        with pytest.raises(PublishError, match="not a LoRA adapter folder"):
            await publisher.publish_adapter(tmp_path / "ckpt", round_id=3, step=1)
        server.should_exit = True
    assert first.kind == "lora" and first.served_model == "policy-lora-r0002-s000001"
    assert second.served_model == "policy-lora-r0002-s000002" and second.bytes > 1000 and second.seconds > 0
    shared = tmp_path / "shared"
    assert [(r[0], r[1]) for r in fake.requests] == [
        (ADAPTER_PATHS[0], {"lora_name": first.served_model, "lora_path": str(shared / str(first.served_model))}),
        (ADAPTER_PATHS[0], {"lora_name": second.served_model, "lora_path": str(shared / str(second.served_model))}),
        (ADAPTER_PATHS[1], {"lora_name": first.served_model}),
        # New full weights: every adapter of the old ones goes first, and rollouts use the base name.
        (ADAPTER_PATHS[1], {"lora_name": "policy-lora-r0001-s000008"}),
        (ADAPTER_PATHS[1], {"lora_name": second.served_model}),
        ("/collective_rpc", {"method": "reload_weights", "args": [], "kwargs": {"weights_path": str(shared / "round-0003-step-000000")}}),
        ("/reset_prefix_cache", None),
    ]  # fmt: skip
    assert publisher.served_model is None and full is not None
    assert full.kind == "full" and full.bytes > 0
