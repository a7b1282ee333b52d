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

Several policy servers (vLLM replicas, `simulate.replicas.ReplicaPool`) each get every update,
concurrently; `publish` returns once every replica that can has loaded it. A replica that cannot
is ejected from the pool, so no rollout samples its stale weights, and the update becomes the
pool's restore hook (`trainer.publish_calls.LiveWeights`): a replica comes back only after loading
it. The publish fails only when no replica took the update.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio
import anyio.to_thread
import httpx
import structlog
from pydantic import BaseModel

from simulate.replicas import Replica, ReplicaPool
from trainer.checkpoints import ADAPTER_DIR
from trainer.publish_calls import ADAPTER_PREFIX, LiveWeights, ServerCallError, ServerCalls

log = structlog.get_logger(__name__)

# In each shared copy: the signature of the checkpoint it was copied from (a hidden file, which
# vLLM's loader does not read).
COPY_MARK = ".published-from.json"
__all__ = ["ADAPTER_PREFIX", "COPY_MARK", "HttpWeightPublisher", "LocalWeightPublisher", "PublishError"]


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
    """Shares a checkpoint through a folder and tells every policy server (vLLM replica) to reload from it.

    `base_url` is one server or a list of replicas; `pool` is the replica pool the policy clients
    share (`simulate.replicas.shared_pool`), else the publisher makes its own. After each
    successful reload the folder keeps only the newest `keep` publications.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
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
        pool: ReplicaPool | None = None,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("base_url: at least one policy server is needed")
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base_url must start with http:// or https://, got {url!r}")
        if keep < 1:
            raise ValueError(f"keep must be at least 1 (the live weights), got {keep}")
        self.pool = pool or ReplicaPool(urls, role="policy", api_key=api_key, transport=transport)
        self.base_url = self.pool.replicas[0].url  # the first (the only) server's root
        self.shared_dir = Path(shared_dir)
        self.keep = keep
        self.calls = ServerCalls(
            reload_path=reload_path,
            reset_cache_path=reset_cache_path,
            api_key=api_key,
            timeout_s=timeout_s,
            retries=retries,
            backoff_s=backoff_s,
            transport=transport,
        )
        # The LoRA adapter the servers serve the policy under (None: the full weights, base name).
        self.served_model: str | None = None

    @property
    def base_urls(self) -> list[str]:
        """Every policy server's root."""
        return [r.url for r in self.pool.replicas]

    def shared_path(self, round_id: int, step: int) -> Path:
        """Where the server reads the weights of one publication."""
        return self.shared_dir / f"round-{round_id:04d}-step-{step:06d}"

    async def publish(self, checkpoint: Path, *, round_id: int, step: int) -> WeightSync:
        """Copy the checkpoint to the shared folder, then ask every server to reload from it."""
        started = time.perf_counter()
        checkpoint = Path(checkpoint)
        if not _has_weights(checkpoint):
            raise PublishError(f"{checkpoint} holds no safetensors weights")
        target = self.shared_path(round_id, step)
        copied = await anyio.to_thread.run_sync(_copy_folder, checkpoint, target)
        served = self.served_model

        async def reload(client: httpx.AsyncClient, root: str) -> None:
            await self.calls.reload(client, root, target, served)

        took = await self._everywhere(reload, LiveWeights(self.calls, full=target), f"weights {target.name}")
        self.served_model = None
        # Only now, with the servers on the new weights, may older copies go: one copy per update
        # (every GRPO step with an HTTP rollout server) would otherwise fill the disk within days.
        removed = await anyio.to_thread.run_sync(self._prune, target)
        sync = WeightSync(kind="full", bytes=_folder_bytes(target), seconds=time.perf_counter() - started)
        log.info(
            "weights.published",
            kind="http",
            path=str(target),
            server=self.base_url,
            replicas=took,
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

        async def load(client: httpx.AsyncClient, root: str) -> None:
            await self.calls.load_adapter(client, root, name, target, previous)

        base = self.pool.restore.full if isinstance(self.pool.restore, LiveWeights) else None
        live = LiveWeights(self.calls, full=base, adapter=(name, target))
        took = await self._everywhere(load, live, f"adapter {name}")
        self.served_model = name
        removed = await anyio.to_thread.run_sync(self._prune, target, f"{ADAPTER_PREFIX}*")
        seconds = time.perf_counter() - started
        sync = WeightSync(kind="lora", bytes=_folder_bytes(target), seconds=seconds, served_model=name)
        log.info(
            "weights.published",
            round=round_id,
            step=step,
            replicas=took,
            removed=len(removed),
            **sync.model_dump(),
        )
        return sync

    async def _everywhere(
        self, update: Callable[[httpx.AsyncClient, str], Awaitable[None]], live: LiveWeights, what: str
    ) -> list[str]:
        """`update` on every serving replica, concurrently; returns the roots that took it.

        An ejected replica that answers its probe gets all of `live` instead (it may have restarted
        with other weights) and returns; one that does not answer is left for its return, when it
        gets `live` through the pool's restore hook. Serving replicas that fail are ejected; if no
        replica took the update, nothing changes and `PublishError` says why for each.
        """
        errors: dict[Replica, str] = {}
        took: list[Replica] = []

        async def one(client: httpx.AsyncClient, replica: Replica) -> None:
            try:
                if replica.serving:
                    await update(client, replica.url)
                elif (problem := await self.pool.probe(replica)) is not None:
                    errors[replica] = f"ejected ({replica.reason[:200]}) and not answering: {problem}"
                    return
                else:
                    await live.apply(client, replica.url)
            except ServerCallError as exc:
                errors[replica] = str(exc)
                return
            took.append(replica)

        # Returns wait for the lock: none comes back with the weights being replaced here.
        async with self.pool.publishing(), self.calls.client() as client:
            async with anyio.create_task_group() as tg:
                for replica in self.pool.replicas:
                    tg.start_soon(one, client, replica)
            if not took:
                if len(self.pool.replicas) == 1:
                    raise PublishError(next(iter(errors.values())))
                detail = "; ".join(f"{r.url}: {e}" for r, e in errors.items())
                raise PublishError(f"no policy replica took the {what}: {detail}")
            self.pool.set_restore(live)
            for replica, error in errors.items():
                if replica.serving:
                    self.pool.eject(replica, f"could not load the {what}: {error}")
                    log.warning("weights.replica_dropped", replica=replica.url, what=what, error=error[:300])
            for replica in took:
                self.pool.readmit(replica)
        return [r.url for r in took]

    def _prune(self, live: Path, pattern: str = "round-*-step-*") -> list[Path]:
        """Delete all but the newest `keep` publications (never `live`); returns the deleted folders."""
        # Names are zero-padded round and step numbers, so their order is the publishing order.
        published = sorted(p for p in self.shared_dir.glob(pattern) if p.is_dir())
        doomed = [p for p in published[: -self.keep] if p != live]
        for folder in doomed:
            shutil.rmtree(folder, ignore_errors=True)
        return doomed


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
