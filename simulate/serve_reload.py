"""vLLM's weight-reload endpoints for `arena serve-model --allow-reload`.

`POST /collective_rpc` with `{"method": "reload_weights", "kwargs": {"weights_path": DIR}}` loads
the safetensors weights in DIR into the served model between decode batches, and
`POST /reset_prefix_cache` drops cached prefixes; `POST /v1/load_lora_adapter` with
`{"lora_name": NAME, "lora_path": DIR}` serves the weights plus a LoRA adapter under NAME, and
`POST /v1/unload_lora_adapter` with `{"lora_name": NAME}` drops it. These are the calls the trainer's
`HttpWeightPublisher` makes to a vLLM server, so the CPU server can stand in for vLLM when GRPO
samples its rollouts over HTTP (`trainer.rollout_backend = "http"`). Whoever reaches the endpoints
can swap the served weights, so `arena serve-model` offers them on loopback hosts only.

One difference from vLLM: vLLM keeps the base model and every loaded adapter servable side by side;
this server merges one adapter into the weights it holds, so loading another replaces it (its name
is then refused) and, while one is loaded, the base name is served the adapted weights too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from arena.protocols import ModelError
from simulate.wire_errors import error_response, validation_message

log = structlog.get_logger(__name__)


@runtime_checkable
class ReloadableModel(Protocol):
    """A served model whose weights can be replaced in place (`simulate.local.LocalChatModel`)."""

    def load_weights(self, path: str | Path) -> None: ...

    def weights_changed(self) -> None: ...


@runtime_checkable
class AdapterModel(Protocol):
    """A served model that can merge a LoRA adapter into its weights (`simulate.local.LocalChatModel`)."""

    def load_adapter(self, path: str | Path) -> None: ...

    def unload_adapter(self) -> None: ...


class RpcRequest(BaseModel):
    """The body of `POST /collective_rpc` (the subset of vLLM's that reloads weights)."""

    model_config = ConfigDict(extra="ignore")

    method: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)


class LoadAdapterRequest(BaseModel):
    """The body of vLLM's `POST /v1/load_lora_adapter`."""

    model_config = ConfigDict(extra="ignore")

    lora_name: str = Field(min_length=1)
    lora_path: str = Field(min_length=1)


class UnloadAdapterRequest(BaseModel):
    """The body of vLLM's `POST /v1/unload_lora_adapter`."""

    model_config = ConfigDict(extra="ignore")

    lora_name: str = Field(min_length=1)


async def _body(request: Request, model: type[BaseModel]) -> Any:
    """The validated JSON body, or the 400 response that says what is wrong with it."""
    try:
        return model.model_validate(await request.json())
    except ValidationError as exc:  # before ValueError, its base class
        return error_response(400, validation_message(exc))
    except ValueError as exc:  # not JSON
        return error_response(400, f"the request body is not valid JSON: {exc}")


def reload_routes(model: ReloadableModel, names: set[str]) -> list[Route]:
    """The reload and adapter endpoints for `model`; `names` are the model names the app serves
    (a loaded adapter's name is added to them while it is served)."""
    adapters: list[str] = []  # the adapter served now (at most one)

    def drop_adapter_names() -> None:
        names.difference_update(adapters)
        adapters.clear()

    async def collective_rpc(request: Request) -> JSONResponse:
        rpc = await _body(request, RpcRequest)
        if isinstance(rpc, JSONResponse):
            return rpc
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
        drop_adapter_names()  # new full weights: the adapter merged into the old ones is gone
        log.info("serve.weights_reloaded", path=path)
        return JSONResponse({"results": [None]})

    async def load_lora_adapter(request: Request) -> Response:
        req = await _body(request, LoadAdapterRequest)
        if isinstance(req, JSONResponse):
            return req
        if req.lora_name in names - set(adapters):
            return error_response(400, f"{req.lora_name!r} is the served model's own name", param="lora_name")
        if not isinstance(model, AdapterModel):
            return error_response(400, "this model cannot serve LoRA adapters")
        if not await anyio.Path(req.lora_path).is_dir():
            return error_response(400, f"lora_path {req.lora_path} is not a folder", param="lora_path")
        try:
            await anyio.to_thread.run_sync(model.load_adapter, req.lora_path)
        except ModelError as exc:  # not a plain LoRA adapter of this model: nothing was changed
            return error_response(400, str(exc), param="lora_path")
        drop_adapter_names()
        adapters.append(req.lora_name)
        names.add(req.lora_name)
        log.info("serve.adapter_loaded", name=req.lora_name, path=req.lora_path)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    async def unload_lora_adapter(request: Request) -> Response:
        req = await _body(request, UnloadAdapterRequest)
        if isinstance(req, JSONResponse):
            return req
        if req.lora_name not in adapters:
            return error_response(404, f"no LoRA adapter {req.lora_name!r} is loaded", param="lora_name")
        assert isinstance(model, AdapterModel)  # it loaded the adapter
        await anyio.to_thread.run_sync(model.unload_adapter)
        drop_adapter_names()
        log.info("serve.adapter_unloaded", name=req.lora_name)
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' removed successfully.")

    async def reset_prefix_cache(_: Request) -> JSONResponse:
        await anyio.to_thread.run_sync(model.weights_changed)
        return JSONResponse({})

    return [
        Route("/collective_rpc", collective_rpc, methods=["POST"]),
        Route("/reset_prefix_cache", reset_prefix_cache, methods=["POST"]),
        Route("/v1/load_lora_adapter", load_lora_adapter, methods=["POST"]),
        Route("/v1/unload_lora_adapter", unload_lora_adapter, methods=["POST"]),
    ]
