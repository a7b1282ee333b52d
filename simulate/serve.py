"""An OpenAI-compatible server over any `ChatModel` (the local backend for `arena serve-model`).

- `POST /v1/chat/completions` (`simulate.serve_chat`): `tools` with `tool_choice` none, auto,
  required or a named function (Hermes `<tool_call>` blocks come back as native `tool_calls`, each
  with a unique id), `parallel_tool_calls`, `n`, `logprobs`, `response_format` (`json_object` /
  `json_schema`), `seed`, `stop`, vLLM's `return_token_ids`, and `stream` (server-sent events with
  content and tool-call deltas, `stream_options.include_usage`, ending with `data: [DONE]`).
- `POST /v1/completions` (`simulate.serve_completions`): a raw prompt as text or token ids, token
  ids and logprobs back in vLLM's shape; over a model with a local decode loop only.
- `GET /v1/models` lists the served model (and a loaded LoRA adapter) and `/health` answers 200.
- With `allow_reload`, vLLM's weight-reload endpoints (`simulate.serve_reload`).

Every failure, an unknown route included, is an OpenAI-style `{"error": {...}}` body
(`simulate.wire_errors`). `serving(app)` runs an app under uvicorn inside the caller's task group
(tests, the CLI).
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import structlog
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from arena.listen import listening_socket
from arena.protocols import ChatModel, ModelError
from arena.types import Completion
from simulate.generation_defaults import generation_defaults
from simulate.model_errors import ModelRequestError
from simulate.serve_chat import ChatRequest, chat_body, chat_events, plan_tools, sampling_params, to_messages
from simulate.serve_completions import (
    CompletionRequest,
    RawCompleter,
    complete,
    completion_body,
    completion_events,
)
from simulate.serve_reload import ReloadableModel, reload_routes
from simulate.wire_errors import WireError, check_model, error_handlers, error_response, validation_message

log = structlog.get_logger(__name__)

EVENT_STREAM = "text/event-stream"
_Req = TypeVar("_Req", bound=BaseModel)


async def _parse(request: Request, schema: type[_Req]) -> _Req:
    """The request body as `schema`; `WireError` naming what is wrong with it."""
    try:
        raw = await request.json()
    except ValueError:
        raise WireError("the request body is not valid JSON") from None
    try:
        req = schema.model_validate(raw)
    except ValidationError as exc:
        raise WireError(validation_message(exc)) from None
    if getattr(req, "stream_options", None) is not None and not getattr(req, "stream", False):
        raise WireError("stream_options is only allowed with stream=true", param="stream_options")
    return req


def _answering(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """`handler` with refused requests and model failures answered in OpenAI's error shape."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except WireError as exc:
            return exc.response()
        except ModelRequestError as exc:  # the backend refused this request (too long, bad schema)
            return error_response(400, str(exc))
        except ModelError as exc:
            log.warning("serve.model_error", path=request.url.path, error=str(exc))
            return error_response(500, str(exc), kind="server_error")

    return endpoint


def create_app(
    model: ChatModel,
    *,
    name: str | None = None,
    aliases: tuple[str, ...] = (),
    allow_reload: bool = False,
) -> Starlette:
    """The OpenAI-compatible Starlette app serving `model` under `name` (and `aliases`).

    `allow_reload` adds vLLM's weight-reload endpoints (`simulate.serve_reload`).
    """
    if allow_reload and not isinstance(model, ReloadableModel):
        raise ValueError(f"model {model.name!r} cannot reload weights (it has no load_weights)")
    served = name or model.name
    accepted = {served, *aliases}
    tokenizer = getattr(model, "tokenizer", None)
    created = int(time.time())
    # Sampling fields a request leaves out come from the model's generation config, as on vLLM.
    defaults = generation_defaults(model)

    async def chat_completions(request: Request) -> Response:
        req = await _parse(request, ChatRequest)
        check_model(req.model, accepted, served)
        messages = to_messages(req.messages)
        plan = plan_tools(req)
        params = [sampling_params(req, plan, i, defaults) for i in range(req.n)]
        results: list[Completion | None] = [None] * req.n
        errors: list[ModelError] = []
        template: dict[str, Any] = {}
        if req.chat_template_kwargs is not None:
            if not isinstance(model, RawCompleter):  # only a local decode loop renders templates here
                raise WireError(
                    f"model {served!r} does not render chat templates here: chat_template_kwargs cannot apply",
                    param="chat_template_kwargs",
                )
            template = {"chat_template_kwargs": req.chat_template_kwargs}

        async def one(i: int) -> None:
            try:
                results[i] = await model.chat(
                    messages, tools=plan.tools or None, params=params[i], **template
                )
            except ModelError as exc:
                errors.append(exc)

        # The n samples go in concurrently so that a batching backend decodes them together.
        async with anyio.create_task_group() as tg:
            for i in range(req.n):
                tg.start_soon(one, i)
        if errors:
            # A refused request (400) explains more than the failures it caused in other samples.
            raise next((e for e in errors if isinstance(e, ModelRequestError)), errors[0])
        done = [r for r in results if r is not None]
        if req.stream:
            events = chat_events(req, plan, done, served=served, tokenizer=tokenizer)
            return StreamingResponse(events, media_type=EVENT_STREAM)
        return JSONResponse(chat_body(req, plan, done, served=served, tokenizer=tokenizer))

    async def completions(request: Request) -> Response:
        req = await _parse(request, CompletionRequest)
        check_model(req.model, accepted, served)
        if not isinstance(model, RawCompleter):
            raise WireError(
                f"model {served!r} has no local decode loop to complete raw prompts; "
                "use /v1/chat/completions",
                status=404,
            )
        prompts, results = await complete(model, req, defaults)
        if req.stream:
            events = completion_events(model, req, prompts, results, served=served)
            return StreamingResponse(events, media_type=EVENT_STREAM)
        return JSONResponse(completion_body(model, req, prompts, results, served=served))

    card = {"id": served, "object": "model", "created": created, "owned_by": "arena"}

    own = set(accepted)  # the names served from the start; others are loaded LoRA adapters

    async def models(_: Request) -> JSONResponse:
        # Loaded adapters are listed as vLLM lists them: a model of their own, parented by the base.
        adapters = [{**card, "id": n, "parent": served} for n in sorted(accepted - own)]
        return JSONResponse({"object": "list", "data": [card, *adapters]})

    async def one_model(request: Request) -> Response:
        check_model(request.path_params["model"], accepted, served)
        return JSONResponse(card)

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "model": served})

    routes = [
        Route("/v1/chat/completions", _answering(chat_completions), methods=["POST"]),
        Route("/v1/completions", _answering(completions), methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model:path}", _answering(one_model), methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    if allow_reload:
        routes += reload_routes(model, accepted)  # type: ignore[arg-type]  (checked above)
    return Starlette(routes=routes, exception_handlers=error_handlers())


@asynccontextmanager
async def serving(app: Any, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Run `app` under uvicorn while the block runs; yields its base URL (port 0 = any free port)."""
    import uvicorn

    sock = listening_socket(host, port)
    bound = sock.getsockname()[1]
    ready = anyio.Event()

    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            ready.set()

    # log_config=None: uvicorn's own dictConfig would give its loggers stream handlers that bypass
    # the process's JSON logging (ops.logging); only their level is set.
    config = uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off", access_log=False)
    server = _Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        await ready.wait()
        try:
            yield f"http://{host}:{bound}"
        finally:
            server.should_exit = True
    sock.close()
