"""Model configuration (`ModelSpec`) and the one function that turns it into a `ChatModel`.

```toml
[models.policy]            # local: transformers in this process
backend = "local"
model = "embedded"         # or a model folder
device = "auto"            # cpu, cuda, cuda:1, auto
max_batch = 32

[models.helper]            # http: any OpenAI-compatible server (vLLM)
backend = "http"
model = "Qwen/Qwen3-8B"    # the served model name
base_url = "http://vllm:8000/v1"
replica_urls = ["http://vllm-2:8000/v1"]   # more replicas of the same server (optional)
```
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from arena.protocols import ChatModel
from simulate.precision import Dtype
from simulate.replicas import server_root


class ModelSpec(BaseModel):
    """How to reach one model: a role's backend, and the `[models.policy]` / `[models.helper]` tables.

    The daemon's settings hold one per role (`ops.config_sections.ModelsConfig`); what is not
    configuration (the role, the cache folder, the chat-template arguments) goes to
    `build_chat_model` beside it.
    """

    # Unknown keys are typos more often than not: refuse them so they are not silently ignored.
    model_config = ConfigDict(extra="forbid", validate_default=True)

    backend: Literal["local", "http"] = Field(
        "local", description="local (transformers) or http (OpenAI API)."
    )
    model: str = Field(
        "embedded", min_length=1, description="'embedded', a local folder, or the served model name."
    )
    base_url: str | None = Field(None, description="OpenAI-compatible server, e.g. http://vllm:8000/v1.")
    replica_urls: list[str] = Field(
        default_factory=list,
        description="More replicas of the same server beside base_url (a JSON list or comma-separated): "
        "requests go to the least busy one, a failing one is ejected until it answers again, and the "
        "policy's weights are published to each.",
    )
    api_key: SecretStr | None = Field(None, description="API key for the http backend.")
    timeout_s: float = Field(120.0, gt=0, description="Per-request timeout.")
    connect_timeout_s: float = Field(10.0, gt=0, description="Connect timeout (http).")
    max_retries: int = Field(3, ge=0, le=20, description="Retries on transient errors (http).")
    concurrency: int = Field(4, ge=1, le=4096, description="Concurrent requests to this backend.")
    breaker_cooldown_s: float = Field(
        30.0,
        ge=0,
        description="Seconds a failing server (an ejected replica) is left alone before it is probed again (http).",
    )
    device: str = Field("cpu", description="Device for the local backend (cpu, cuda, cuda:0, auto).")
    dtype: Dtype | None = Field(
        None,
        description="Local backend: none is float32 on CPU (batch-invariant greedy decoding), bfloat16 "
        "on GPU; auto is bfloat16 wherever native.",
    )
    max_batch: int = Field(
        32, ge=1, le=512, description="Local backend: requests decoded together in one batch."
    )
    batch_wait_ms: float = Field(
        5.0,
        ge=0.0,
        le=1000.0,
        description="Local backend: how long a batch waits for more requests to join it.",
    )
    backoff_s: float = Field(0.5, ge=0, description="First wait before retrying a transient error (http).")
    backoff_max_s: float = Field(20.0, ge=0, description="Longest wait between retries (http).")
    breaker_threshold: int = Field(
        5, ge=1, description="Consecutive failures after which a server (a replica) is ejected (http)."
    )
    return_token_ids: bool = Field(
        True, description="Ask the server for the completion's token ids (http; vLLM's return_token_ids)."
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @field_validator("replica_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        # ARENA_MODELS__POLICY__REPLICA_URLS="http://a:8000/v1,http://b:8000/v1" as well as JSON.
        if isinstance(value, str):
            return [u.strip() for u in value.split(",") if u.strip()]
        return value

    @field_validator("replica_urls")
    @classmethod
    def _replica_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} must start with http:// or https://")
        return urls

    @model_validator(mode="after")
    def _http_needs_url(self) -> ModelSpec:
        if self.backend == "http" and not self.base_url:
            raise ValueError("the http backend needs base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.replica_urls and self.backend != "http":
            raise ValueError("replica_urls is for the http backend (replicas of an OpenAI-compatible server)")
        seen: set[str] = set()
        for url in self.urls:
            if server_key(url) in seen:
                raise ValueError(f"{url} is listed twice among base_url and replica_urls")
            seen.add(server_key(url))
        return self

    @property
    def urls(self) -> list[str]:
        """Every replica's base URL: `base_url`, then `replica_urls` (empty without base_url)."""
        return [self.base_url, *self.replica_urls] if self.base_url else []

    def api_key_value(self) -> str | None:
        """The API key in plain text, for the one request header or client that needs it."""
        return self.api_key.get_secret_value() if self.api_key is not None else None

    def identity(self) -> str:
        """A stable name of this model, under which measurements of it are stored.

        `local:embedded`, `local:/abs/folder` or `http:MODEL@URL`: a local folder is named by its
        absolute path, so a relative path in a config and the same folder on the command line
        name one model.
        """
        model = self.model
        if self.backend == "local" and model != "embedded":
            model = os.path.abspath(os.path.expanduser(model))
        identity = f"{self.backend}:{model}"
        if self.backend == "http" and self.base_url:
            identity += "@" + self.base_url.rstrip("/")
        return identity


def server_key(url: str | None) -> str:
    """A server's root (`simulate.replicas.server_root`), lower-cased: two URLs of one server match."""
    return server_root(url or "").lower()


def build_chat_model(
    spec: ModelSpec,
    *,
    role: str = "policy",
    cache_dir: Path | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> ChatModel:
    """A ready chat model for `spec` in `role`. Local models load here (blocking, seconds); raises `ModelError`.

    `cache_dir` (else under `ARENA_DATA_DIR`) is where the embedded model is converted and cached.
    `chat_template_kwargs` (Qwen3's enable_thinking, ...) go to local rendering and to vLLM's chat
    requests alike (`simulate.chat_format`); the daemon gives the policy `trainer.chat_template_kwargs`.
    An http policy pins every sampling field (see below); a helper does not.
    Every call builds a new model: two roles never share weights by accident (the policy trains,
    the helper must not change). To share one local model between roles on purpose, build it once
    and wrap it with `simulate.calls.with_role`.
    """
    template_kwargs = dict(chat_template_kwargs or {})
    if spec.backend == "local":
        from simulate.local import LocalChatModel

        return LocalChatModel.load(
            spec.model,
            device=spec.device,
            role=role,
            max_batch=spec.max_batch,
            batch_wait_ms=spec.batch_wait_ms,
            cache_dir=cache_dir,
            dtype=spec.dtype,
            chat_template_kwargs=template_kwargs,
        )
    from simulate.http import HttpChatModel
    from simulate.replicas import shared_pool

    assert spec.base_url is not None  # checked by the validator
    api_key = spec.api_key_value()
    # Shared with every client and publisher of the same servers in this process: an ejection seen
    # by one is seen by all, and a replica returns only with the weights the publisher installed.
    pool = shared_pool(
        spec.urls,
        role=role,
        threshold=spec.breaker_threshold,
        cooldown_s=spec.breaker_cooldown_s,
        probe_timeout_s=spec.connect_timeout_s,
        api_key=api_key,
    )
    return HttpChatModel(
        spec.urls,
        spec.model,
        api_key=api_key,
        role=role,
        timeout_s=spec.timeout_s,
        connect_timeout_s=spec.connect_timeout_s,
        retries=spec.max_retries,
        backoff_s=spec.backoff_s,
        backoff_max_s=spec.backoff_max_s,
        breaker_threshold=spec.breaker_threshold,
        breaker_cooldown_s=spec.breaker_cooldown_s,
        concurrency=spec.concurrency,
        return_token_ids=spec.return_token_ids,
        # The policy's server is vLLM (its weights are published there): every sampling field is
        # sent, so evaluation samples as GRPO's token-id rollouts do, whatever generation_config.json says.
        pin_sampling=role == "policy",
        chat_template_kwargs=template_kwargs,
        pool=pool,
    )
