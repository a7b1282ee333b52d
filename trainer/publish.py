"""Publishing new weights to whatever generates the rollouts.

`WeightPublisher.publish(checkpoint, round_id=…, step=…)` is called after an update (or a round)
with a checkpoint folder (safetensors + tokenizer, see `trainer.checkpoints`):

- `LocalWeightPublisher` loads the weights into a local model (the daemon's policy
  `LocalChatModel`, or anything with `load_weights(path)`), between decode batches;
- `HttpWeightPublisher` copies the checkpoint into a folder the vLLM server can read (a shared
  volume) and asks the server to reload from it over HTTP (vLLM's dev-mode `collective_rpc`
  endpoint calling the workers' `reload_weights`), then resets the prefix cache so no stale KV
  entries from the old weights are reused. Requests are retried a few times on connection errors
  and 5xx; any other failure raises `PublishError` with the server's message.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import anyio.to_thread
import httpx
import structlog
from pydantic import BaseModel

from trainer.checkpoints import ADAPTER_DIR

log = structlog.get_logger(__name__)

# In each shared copy: the signature of the checkpoint it was copied from (a hidden file, which
# vLLM's loader does not read).
COPY_MARK = ".published-from.json"
# The served names (and shared folders) of the policy's LoRA adapters: `policy-lora-rRRRR-sSSSSSS`.
ADAPTER_PREFIX = "policy-lora-"


class WeightSync(BaseModel):
    """One update reaching the rollout server: how, how many bytes were written, how long it took."""

    kind: Literal["full", "lora"]
    bytes: int
    seconds: float
    served_model: str | None = None  # the name rollouts use from then on (None: the server's own)


class PublishError(RuntimeError):
    """New weights could not be published (the rollout server refused or is unreachable)."""


@runtime_checkable
class WeightPublisher(Protocol):
    """Pushes a checkpoint to the rollout generator."""

    async def publish(self, checkpoint: Path, *, round_id: int, step: int) -> WeightSync | None:
        """Make the rollout model use the weights in `checkpoint`; how it went, where measured.
        Raises `PublishError`."""
        ...


class WeightTarget(Protocol):
    """A local model that can load a checkpoint folder (`simulate.local.LocalChatModel`)."""

    def load_weights(self, path: str | Path) -> None: ...


class LocalWeightPublisher:
    """Loads published checkpoints into an in-process model (CPU demo, single-GPU setups)."""

    def __init__(self, target: WeightTarget) -> None:
        self.target = target
        self.published: list[tuple[Path, int, int]] = []

    async def publish(self, checkpoint: Path, *, round_id: int, step: int) -> None:
        """Load the checkpoint's safetensors into the target model (in a worker thread); nothing is
        sent anywhere, so there is no sync to measure."""
        if not _has_weights(Path(checkpoint)):
            raise PublishError(f"{checkpoint} holds no safetensors weights")
        try:
            await anyio.to_thread.run_sync(self.target.load_weights, checkpoint)
        except Exception as exc:
            raise PublishError(f"loading {checkpoint} into the local policy failed: {exc}") from exc
        self.published.append((Path(checkpoint), round_id, step))
        log.info("weights.published", kind="local", path=str(checkpoint), round=round_id, step=step)


class HttpWeightPublisher:
    """Shares a checkpoint through a folder and tells a vLLM server to reload from it.

    After each successful reload the folder keeps only the newest `keep` publications.
    """

    def __init__(
        self,
        base_url: str,
        shared_dir: Path,
        *,
        reload_path: str = "/collective_rpc",
        reset_cache_path: str | None = "/reset_prefix_cache",
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        keep: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if keep < 1:
            raise ValueError(f"keep must be at least 1 (the live weights), got {keep}")
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.shared_dir = Path(shared_dir)
        self.reload_path = reload_path
        self.reset_cache_path = reset_cache_path
        self.retries = retries
        self.backoff_s = backoff_s
        self.keep = keep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client_args: dict[str, Any] = {"timeout": timeout_s, "headers": headers, "transport": transport}
        # The LoRA adapter the server serves the policy under (None: the full weights, base name).
        self.served_model: str | None = None

    def shared_path(self, round_id: int, step: int) -> Path:
        """Where the server reads the weights of one publication."""
        return self.shared_dir / f"round-{round_id:04d}-step-{step:06d}"

    async def publish(self, checkpoint: Path, *, round_id: int, step: int) -> WeightSync:
        """Copy the checkpoint to the shared folder, then ask the server to reload from it."""
        started = time.perf_counter()
        checkpoint = Path(checkpoint)
        if not _has_weights(checkpoint):
            raise PublishError(f"{checkpoint} holds no safetensors weights")
        target = self.shared_path(round_id, step)
        copied = await anyio.to_thread.run_sync(_copy_folder, checkpoint, target)
        body = {"method": "reload_weights", "args": [], "kwargs": {"weights_path": str(target)}}
        async with httpx.AsyncClient(**self._client_args) as client:
            # Adapters of the weights being replaced go first: this publisher's, and any an earlier
            # round (another publisher, a crashed daemon) left loaded, which would pile up for weeks.
            for name in await self._loaded_adapters(client):
                await self._unload(client, name)
            self.served_model = None
            await self._post(client, self.reload_path, body)
            if self.reset_cache_path:
                await self._post(client, self.reset_cache_path, None)
        # Only now, with the server on the new weights, may older copies go: one copy per update
        # (every GRPO step with an HTTP rollout server) would otherwise fill the disk within days.
        removed = await anyio.to_thread.run_sync(self._prune, target)
        sync = WeightSync(kind="full", bytes=_folder_bytes(target), seconds=time.perf_counter() - started)
        log.info(
            "weights.published",
            kind="http",
            path=str(target),
            server=self.base_url,
            round=round_id,
            step=step,
            copied=copied,
            removed=len(removed),
            bytes=sync.bytes,
            seconds=round(sync.seconds, 3),
        )
        return sync

    async def publish_adapter(self, adapter: Path, *, round_id: int, step: int) -> WeightSync:
        """Serve the round's full weights plus the LoRA adapter in `adapter` (peft's folder).

        Megabytes instead of the model's gigabytes: the adapter is copied to the shared folder and
        loaded under its own name (vLLM's `/v1/load_lora_adapter`; the server runs with
        `--enable-lora` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`), then the adapter served
        before is unloaded. Rollouts name `served_model` from then on. The adapter is relative to
        the full weights published last (the round's start), which stay loaded.
        """
        started = time.perf_counter()
        adapter = Path(adapter)
        if not (adapter / "adapter_config.json").is_file():
            raise PublishError(f"{adapter} is not a LoRA adapter folder (no adapter_config.json)")
        name = f"{ADAPTER_PREFIX}r{round_id:04d}-s{step:06d}"
        target = self.shared_dir / name
        await anyio.to_thread.run_sync(_copy_folder, adapter, target)
        previous = self.served_model
        async with httpx.AsyncClient(**self._client_args) as client:
            await self._post(client, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(target)})
            self.served_model = name
            if previous is not None and previous != name:
                await self._unload(client, previous)
        removed = await anyio.to_thread.run_sync(self._prune, target, f"{ADAPTER_PREFIX}*")
        seconds = time.perf_counter() - started
        sync = WeightSync(kind="lora", bytes=_folder_bytes(target), seconds=seconds, served_model=name)
        log.info("weights.published", round=round_id, step=step, removed=len(removed), **sync.model_dump())
        return sync

    def _prune(self, live: Path, pattern: str = "round-*-step-*") -> list[Path]:
        """Delete all but the newest `keep` publications (never `live`); returns the deleted folders."""
        # Names are zero-padded round and step numbers, so their order is the publishing order.
        published = sorted(p for p in self.shared_dir.glob(pattern) if p.is_dir())
        doomed = [p for p in published[: -self.keep] if p != live]
        for folder in doomed:
            shutil.rmtree(folder, ignore_errors=True)
        return doomed

    async def _loaded_adapters(self, client: httpx.AsyncClient) -> list[str]:
        """The policy adapters the server lists (`GET /v1/models`); none when it cannot list them."""
        try:
            response = await client.get(self.base_url + "/v1/models")
            listed = response.json().get("data", []) if response.status_code == 200 else []
        except (httpx.HTTPError, ValueError, AttributeError):
            listed = []
        names = {str(m.get("id")) for m in listed if isinstance(m, dict)}
        if self.served_model is not None:
            names.add(self.served_model)
        return sorted(n for n in names if n.startswith(ADAPTER_PREFIX))

    async def _unload(self, client: httpx.AsyncClient, name: str) -> None:
        """Unload adapter `name`; one the server no longer has (it restarted, or serves one adapter
        at a time as `arena serve-model` does) is as good as unloaded."""
        await self._post(client, "/v1/unload_lora_adapter", {"lora_name": name}, gone_ok=True)

    async def _post(
        self, client: httpx.AsyncClient, path: str, body: dict[str, Any] | None, *, gone_ok: bool = False
    ) -> None:
        url = self.base_url + path
        last = ""
        for attempt in range(self.retries + 1):
            try:
                response = await client.post(url, json=body)
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 300 or (gone_ok and response.status_code == 404):
                    return
                last = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code < 500:
                    break  # the server refused the request itself: retrying will not help
            if attempt < self.retries:
                await anyio.sleep(self.backoff_s * (2**attempt))
        raise PublishError(f"POST {url} failed: {last}")


def _folder_bytes(folder: Path) -> int:
    """The bytes of the files in a published folder (what the server reads)."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors"))


def _source_signature(source: Path) -> str:
    """The source folder and each file's path, size and modification time: what a copy is of."""
    files = sorted(
        (path.relative_to(source).as_posix(), stat.st_size, stat.st_mtime_ns)
        for path in source.rglob("*")
        if path.is_file() and ADAPTER_DIR not in path.relative_to(source).parts
        for stat in [path.stat()]
    )
    return json.dumps({"source": str(source.resolve()), "files": files})


def _copy_folder(source: Path, target: Path) -> bool:
    """Copy atomically (the server must never see a half-copied folder); False when already there.

    Each copy carries the signature of its source (`COPY_MARK`), so publishing the same checkpoint
    again, as EVALUATE does every round to put the live policy back into a server that may have
    restarted, costs a reload but not another copy of the weights (16 GB for an 8B model).
    """
    signature = _source_signature(source)
    mark = target / COPY_MARK
    if mark.is_file() and mark.read_text() == signature:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    # A LoRA checkpoint's adapter is only for resuming training: the server loads the merged weights.
    shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(ADAPTER_DIR))
    (tmp / COPY_MARK).write_text(signature)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return True


def build_publisher(config: Any, local_target: WeightTarget | None = None) -> WeightPublisher | None:
    """The publisher a `PublishConfig` describes (None: local kind without a target to load into)."""
    if config.kind == "http":
        return HttpWeightPublisher(
            config.base_url,
            config.shared_dir,
            reload_path=config.reload_path,
            api_key=config.api_key,
            timeout_s=config.timeout_s,
        )
    return LocalWeightPublisher(local_target) if local_target is not None else None
