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

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from arena.protocols import ChatModel
from simulate.precision import Dtype


class ModelSpec(BaseModel):
    """How to reach one model (a role's backend)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["local", "http"] = "local"
    model: str = Field(
        default="embedded", min_length=1, description="local: folder or 'embedded'; http: served name"
    )
    role: str = "policy"
    # Chat-template arguments (Qwen3's enable_thinking, ...): local rendering and vLLM's chat requests
    # alike (`simulate.chat_format`); the daemon gives the policy `trainer.chat_template_kwargs`.
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    # local
    device: str = "auto"
    dtype: Dtype | None = None  # None: float32 on CPU, bfloat16 on GPU (see LocalChatModel.load)
    max_batch: int = Field(default=32, ge=1, le=512)
    batch_wait_ms: float = Field(default=5.0, ge=0.0, le=1000.0)
    cache_dir: Path | None = None  # where "embedded" is converted (default under ARENA_DATA_DIR)
    # http
    base_url: str | None = None
    replica_urls: list[str] = Field(default_factory=list)  # more replicas beside base_url
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    backoff_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=20.0, ge=0)
    breaker_threshold: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=30.0, ge=0)
    concurrency: int = Field(default=16, ge=1, le=4096)
    return_token_ids: bool = True

    @field_validator("replica_urls")
    @classmethod
    def _replica_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"replica URL {url!r} must start with http:// or https://")
        return urls

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.backend == "http":
            if not self.base_url:
                raise ValueError("backend 'http' needs base_url (e.g. http://127.0.0.1:8000/v1)")
            if not self.base_url.startswith(("http://", "https://")):
                raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
            roots = [u.rstrip("/").removesuffix("/v1").rstrip("/") for u in self.urls]
            twice = sorted({u for u in roots if roots.count(u) > 1})
            if twice:
                raise ValueError(f"a replica is listed twice: {', '.join(twice)}")
        return self

    @property
    def urls(self) -> list[str]:
        """Every replica's base URL: `base_url` first, then `replica_urls`."""
        return [self.base_url, *self.replica_urls] if self.base_url else list(self.replica_urls)


def build_chat_model(spec: ModelSpec, *, cache_dir: Path | None = None) -> ChatModel:
    """A ready chat model for `spec`. Local models load here (blocking, seconds); raises `ModelError`.

    `cache_dir` (else `spec.cache_dir`, else under `ARENA_DATA_DIR`) is where the embedded model
    is converted and cached.
    Every call builds a new model: two roles never share weights by accident (the policy trains,
    the helper must not change). To share one local model between roles on purpose, build it once
    and wrap it with `simulate.calls.with_role`.
    """
    if spec.backend == "local":
        from simulate.local import LocalChatModel

        return LocalChatModel.load(
            spec.model,
            device=spec.device,
            role=spec.role,
            max_batch=spec.max_batch,
            batch_wait_ms=spec.batch_wait_ms,
            cache_dir=cache_dir or spec.cache_dir,
            dtype=spec.dtype,
            chat_template_kwargs=spec.chat_template_kwargs,
        )
    from simulate.http import HttpChatModel
    from simulate.replicas import shared_pool

    assert spec.base_url is not None  # checked by the validator
    api_key = spec.api_key.get_secret_value() if spec.api_key else None
    # Shared with every client and publisher of the same servers in this process: an ejection seen
    # by one is seen by all, and a replica returns only with the weights the publisher installed.
    pool = shared_pool(
        spec.urls,
        role=spec.role,
        threshold=spec.breaker_threshold,
        cooldown_s=spec.breaker_cooldown_s,
        probe_timeout_s=spec.connect_timeout_s,
        api_key=api_key,
    )
    return HttpChatModel(
        spec.urls,
        spec.model,
        api_key=api_key,
        role=spec.role,
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
        pin_sampling=spec.role == "policy",
        chat_template_kwargs=spec.chat_template_kwargs,
        pool=pool,
    )
