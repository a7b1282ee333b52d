"""The HTTP calls that put weights into one vLLM server, and the live weights a returning replica gets.

`ServerCalls` speaks vLLM's reload endpoints to one server root at a time (the publisher fans them
out over the policy's replicas). `LiveWeights` is what every serving replica holds after the last
publish: the full weights folder and the LoRA adapter on top, if any. It is the replica pool's
restore hook (`simulate.replicas.ReplicaPool.set_restore`), so a replica that comes back (it was
down, restarted, or failed to load an update) first loads exactly these weights. It holds no
reference to the pool or the publisher: the pool keeps it alive after the publisher is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from tenacity import AsyncRetrying, RetryError, retry_if_exception_type, stop_after_attempt, wait_exponential

# The served names (and shared folders) of the policy's LoRA adapters: `policy-lora-rRRRR-sSSSSSS`.
ADAPTER_PREFIX = "policy-lora-"


class ServerCallError(RuntimeError):
    """A server refused a reload call or could not be reached (the message says which and why)."""


class ServerCalls:
    """Reload calls to a vLLM server root (`http://host:8000`), retried on connection errors and 5xx."""

    def __init__(
        self,
        *,
        reload_path: str = "/collective_rpc",
        reset_cache_path: str | None = "/reset_prefix_cache",
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.reload_path = reload_path
        self.reset_cache_path = reset_cache_path
        self.retries = retries
        self.backoff_s = backoff_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client_args: dict[str, Any] = {"timeout": timeout_s, "headers": headers, "transport": transport}

    def client(self) -> httpx.AsyncClient:
        """A client for one publish (its connections are closed with it)."""
        return httpx.AsyncClient(**self._client_args)

    async def reload(
        self, client: httpx.AsyncClient, root: str, folder: Path, served: str | None = None
    ) -> None:
        """Full weights from `folder`: adapters of the old weights go first (`served` too, if not
        listed), then the reload, then the prefix cache reset (no KV entries of the old weights)."""
        # Adapters an earlier round (another publisher, a crashed daemon) left loaded would pile up.
        for name in await self.loaded_adapters(client, root, served):
            await self.unload(client, root, name)
        body = {"method": "reload_weights", "args": [], "kwargs": {"weights_path": str(folder)}}
        await self.post(client, root, self.reload_path, body)
        if self.reset_cache_path:
            await self.post(client, root, self.reset_cache_path, None)

    async def load_adapter(
        self, client: httpx.AsyncClient, root: str, name: str, folder: Path, previous: str | None = None
    ) -> None:
        """Serve the LoRA adapter in `folder` under `name`, then drop `previous` (the one before)."""
        await self.post(client, root, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
        if previous is not None and previous != name:
            await self.unload(client, root, previous)

    async def loaded_adapters(
        self, client: httpx.AsyncClient, root: str, served: str | None = None
    ) -> list[str]:
        """The policy adapters the server lists (`GET /v1/models`), with `served`; none when it cannot list them."""
        try:
            response = await client.get(root + "/v1/models")
            listed = response.json().get("data", []) if response.status_code == 200 else []
        except (httpx.HTTPError, ValueError, AttributeError):
            listed = []
        names = {str(m.get("id")) for m in listed if isinstance(m, dict)}
        if served is not None:
            names.add(served)
        return sorted(n for n in names if n.startswith(ADAPTER_PREFIX))

    async def unload(self, client: httpx.AsyncClient, root: str, name: str) -> None:
        """Unload adapter `name`; one the server no longer has (it restarted, or serves one adapter
        at a time as `arena serve-model` does) is as good as unloaded."""
        await self.post(client, root, "/v1/unload_lora_adapter", {"lora_name": name}, gone_ok=True)

    async def post(
        self,
        client: httpx.AsyncClient,
        root: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        gone_ok: bool = False,
    ) -> None:
        """POST `body` to `root + path`; `ServerCallError` once retries are spent or on a refusal."""
        url = root + path
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries + 1),
            # A connection error or a 5xx is retried; any other answer settles it (a 4xx refusal
            # is the server's word on the request itself: retrying will not help).
            retry=retry_if_exception_type((httpx.HTTPError, _ServerFailed)),
            wait=wait_exponential(multiplier=self.backoff_s),
            sleep=anyio.sleep,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    response = await client.post(url, json=body)
                    status = response.status_code
                    if status < 300 or (gone_ok and status == 404):
                        return
                    if status >= 500:
                        raise _ServerFailed(f"HTTP {status}: {response.text[:300]}")
                    raise ServerCallError(f"POST {url} failed: HTTP {status}: {response.text[:300]}")
        except RetryError as exc:
            last = exc.last_attempt.exception()
            detail = str(last) if isinstance(last, _ServerFailed) else f"{type(last).__name__}: {last}"
            raise ServerCallError(f"POST {url} failed: {detail}") from None


class _ServerFailed(Exception):
    """A 5xx answer to a reload call (retried like a connection error)."""


@dataclass(frozen=True)
class LiveWeights:
    """The weights the policy's replicas serve since the last publish (a returning replica's restore).

    `full` None: the servers' own starting weights (nothing full was published in this process).
    """

    calls: ServerCalls
    full: Path | None
    adapter: tuple[str, Path] | None = None

    async def apply(self, client: httpx.AsyncClient, root: str) -> None:
        """Load these weights into the server at `root`, whatever it served before."""
        if self.full is not None:
            await self.calls.reload(client, root, self.full)
        if self.adapter is not None:
            await self.calls.load_adapter(client, root, *self.adapter)

    async def __call__(self, root: str) -> None:
        """The pool's restore hook: `apply` with a client of its own."""
        async with self.calls.client() as client:
            await self.apply(client, root)
