"""vLLM's weight-reload endpoints for `arena serve-model --allow-reload`.

`POST /collective_rpc` with `{"method": "reload_weights", "kwargs": {"weights_path": DIR}}` loads
the safetensors weights in DIR into the served model between decode batches, and
`POST /reset_prefix_cache` drops cached prefixes. These are the calls the trainer's
`HttpWeightPublisher` makes to a vLLM server, so the CPU server can stand in for vLLM when GRPO
samples its rollouts over HTTP (`trainer.rollout_backend = "http"`). Whoever reaches the endpoints
can swap the served weights, so `arena serve-model` offers them on loopback hosts only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from arena.protocols import ModelError
from simulate.wire_errors import error_response, validation_message

log = structlog.get_logger(__name__)


@runtime_checkable
class ReloadableModel(Protocol):
    """A served model whose weights can be replaced in place (`simulate.local.LocalChatModel`)."""

    def load_weights(self, path: str | Path) -> None: ...

    def weights_changed(self) -> None: ...


class RpcRequest(BaseModel):
    """The body of `POST /collective_rpc` (the subset of vLLM's that reloads weights)."""

    model_config = ConfigDict(extra="ignore")

    method: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)


def reload_routes(model: ReloadableModel) -> list[Route]:
    """The two reload endpoints for `model`."""

    async def collective_rpc(request: Request) -> JSONResponse:
        try:
            rpc = RpcRequest.model_validate(await request.json())
        except ValidationError as exc:  # before ValueError, its base class
            return error_response(400, validation_message(exc))
        except ValueError as exc:  # not JSON
            return error_response(400, f"the request body is not valid JSON: {exc}")
        if rpc.method != "reload_weights":
            return error_response(
                400, f"only method 'reload_weights' is served, got {rpc.method!r}", param="method"
            )
        path = rpc.kwargs.get("weights_path")
        if not isinstance(path, str) or not path:
            return error_response(400, "kwargs.weights_path (a folder of safetensors weights) is required")
        if not await anyio.Path(path).is_dir():
            return error_response(400, f"weights_path {path} is not a folder", param="weights_path")
        try:
            await anyio.to_thread.run_sync(model.load_weights, path)
        except ModelError as exc:  # no weights there, or weights of another model: nothing was loaded
            return error_response(400, str(exc), param="weights_path")
        log.info("serve.weights_reloaded", path=path)
        return JSONResponse({"results": [None]})

    async def reset_prefix_cache(_: Request) -> JSONResponse:
        await anyio.to_thread.run_sync(model.weights_changed)
        return JSONResponse({})

    return [
        Route("/collective_rpc", collective_rpc, methods=["POST"]),
        Route("/reset_prefix_cache", reset_prefix_cache, methods=["POST"]),
    ]
