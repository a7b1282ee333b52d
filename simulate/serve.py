"""An OpenAI-compatible server over any `ChatModel` (the local backend for `arena serve-model`).

`POST /v1/chat/completions` supports `tools` (Hermes `<tool_call>` blocks in the output come back
as native `message.tool_calls` with `finish_reason: "tool_calls"`), `n`, `logprobs`,
`response_format` (`json_object` / `json_schema`), `seed`, `stop` and vLLM's `return_token_ids`.
`GET /v1/models` lists the one served model and `/health` answers 200. Bad requests get a 400 with
an OpenAI-style `{"error": {...}}` body naming the problem. With `allow_reload`, vLLM's
weight-reload endpoints too (`simulate.serve_reload`).

`serving(app)` runs an app under uvicorn inside the caller's task group (tests, the CLI).
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from arena.episode.parser import parse_tool_calls
from arena.protocols import ChatModel, ModelError
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec
from simulate.model_errors import ModelRequestError
from simulate.serve_reload import ReloadableModel, reload_routes
from simulate.wire_errors import error_response, validation_message

log = structlog.get_logger(__name__)

MAX_N = 16


class _Function(BaseModel):
    name: str
    arguments: str | dict[str, Any] = "{}"


class _WireToolCall(BaseModel):
    id: str = ""
    type: str = "function"
    function: _Function


class _WireMessage(BaseModel):
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[_WireToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class _WireFunctionSpec(BaseModel):
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class _WireTool(BaseModel):
    type: Literal["function"] = "function"
    function: _WireFunctionSpec


class _ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class ChatRequest(BaseModel):
    """The accepted subset of an OpenAI chat completion request."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[_WireMessage] = Field(min_length=1)
    tools: list[_WireTool] | None = None
    tool_choice: Literal["auto", "none"] | None = None
    n: int = Field(default=1, ge=1, le=MAX_N)
    temperature: float = Field(default=1.0, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1, le=32768)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=32768)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=0)
    response_format: _ResponseFormat | None = None
    return_token_ids: bool = False
    stream: bool = False

    @field_validator("stream")
    @classmethod
    def _no_stream(cls, value: bool) -> bool:
        if value:
            raise ValueError("streaming is not supported by this server; send stream=false")
        return value


def _content(value: str | list[dict[str, Any]] | None) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return "".join(str(part.get("text", "")) for part in value if part.get("type", "text") == "text")


def to_messages(wire: list[_WireMessage]) -> list[Message]:
    """Convert request messages to Arena messages; `ValueError` naming the offending field."""
    out: list[Message] = []
    for i, m in enumerate(wire):
        calls: list[ToolCall] = []
        for j, c in enumerate(m.tool_calls or []):
            args: Any = c.function.arguments
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError as exc:
                    raise ValueError(
                        f"messages[{i}].tool_calls[{j}].function.arguments is not valid JSON"
                    ) from exc
            if not isinstance(args, dict):
                raise ValueError(f"messages[{i}].tool_calls[{j}].function.arguments must be a JSON object")
            calls.append(ToolCall(id=c.id, name=c.function.name, arguments=args))
        role = "system" if m.role == "developer" else m.role
        out.append(
            Message(
                role=role,
                content=_content(m.content),
                tool_calls=calls,
                tool_call_id=m.tool_call_id,
                name=m.name,
            )
        )
    return out


def _schema(fmt: _ResponseFormat | None) -> dict[str, Any] | None:
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "object"}
    spec = fmt.json_schema or {}
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise ValueError("response_format.json_schema.schema must be a JSON schema object")
    return schema


def _choice(
    index: int, completion: Completion, *, tools_on: bool, tokenizer: Any, token_ids: bool
) -> dict[str, Any]:
    content: str | None = completion.text
    tool_calls: list[dict[str, Any]] = []
    finish = completion.finish_reason
    if tools_on and completion.tool_calls:
        tool_calls = [_wire_call(c) for c in completion.tool_calls]
    elif tools_on:
        turn = parse_tool_calls(completion.text)
        # Only a cleanly parsed turn becomes native calls; anything malformed stays raw text so
        # the client's parser sees (and penalizes) exactly what the model wrote.
        if turn.calls and not turn.errors:
            tool_calls = [_wire_call(c, f"call_{uuid.uuid4().hex[:16]}") for c in turn.calls]
            content = turn.content or None
    if tool_calls:
        finish = "tool_calls"
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
    if completion.completion_logprobs is not None and completion.completion_token_ids is not None:
        tokens = (
            [tokenizer.decode([t]) for t in completion.completion_token_ids]
            if tokenizer is not None
            else [str(t) for t in completion.completion_token_ids]
        )
        choice["logprobs"] = {
            "content": [
                {"token": tok, "logprob": lp, "bytes": list(str(tok).encode()), "top_logprobs": []}
                for tok, lp in zip(tokens, completion.completion_logprobs, strict=False)
            ]
        }
    if token_ids:
        choice["token_ids"] = completion.completion_token_ids
    return choice


def _wire_call(call: ToolCall, call_id: str | None = None) -> dict[str, Any]:
    return {
        "id": call.id or call_id or f"call_{uuid.uuid4().hex[:16]}",
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }


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

    async def chat_completions(request: Request) -> JSONResponse:
        try:
            raw = await request.json()
        except ValueError:
            return error_response(400, "the request body is not valid JSON")
        try:
            req = ChatRequest.model_validate(raw)
            messages = to_messages(req.messages)
            schema = _schema(req.response_format)
        except ValidationError as exc:
            return error_response(400, validation_message(exc))
        except ValueError as exc:
            return error_response(400, str(exc))
        if req.model is not None and req.model not in accepted:
            return error_response(
                404,
                f"model {req.model!r} not found; this server serves {served!r}",
                kind="not_found_error",
                param="model",
            )
        tools = [
            ToolSpec(
                name=t.function.name, description=t.function.description, parameters=t.function.parameters
            )
            for t in req.tools or []
        ]
        tools_on = bool(tools) and req.tool_choice != "none"
        stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
        base = dict(
            temperature=req.temperature,
            top_p=req.top_p,
            max_tokens=req.max_completion_tokens or req.max_tokens or 256,
            stop=stops,
            logprobs=req.logprobs,
            json_schema=schema,
        )
        results: list[Completion | None] = [None] * req.n
        errors: list[ModelError] = []

        async def one(i: int) -> None:
            seed = None if req.seed is None else req.seed + i
            try:
                results[i] = await model.chat(
                    messages, tools=tools or None, params=SamplingParams(**base, seed=seed)
                )
            except ModelError as exc:
                errors.append(exc)

        # The n samples go in concurrently so that a batching backend decodes them together.
        async with anyio.create_task_group() as tg:
            for i in range(req.n):
                tg.start_soon(one, i)
        if errors:
            request_errors = [e for e in errors if isinstance(e, ModelRequestError)]
            if request_errors:
                return error_response(400, str(request_errors[0]))
            log.warning("serve.model_error", error=str(errors[0]))
            return error_response(500, str(errors[0]), kind="server_error")
        done = [r for r in results if r is not None]
        first = done[0]
        body: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served,
            "choices": [
                _choice(i, c, tools_on=tools_on, tokenizer=tokenizer, token_ids=req.return_token_ids)
                for i, c in enumerate(done)
            ],
            "usage": {
                "prompt_tokens": first.usage.prompt_tokens,
                "completion_tokens": sum(c.usage.completion_tokens for c in done),
                "total_tokens": first.usage.prompt_tokens + sum(c.usage.completion_tokens for c in done),
            },
        }
        if req.return_token_ids:
            body["prompt_token_ids"] = first.prompt_token_ids
        return JSONResponse(body)

    async def models(_: Request) -> JSONResponse:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": served, "object": "model", "created": created, "owned_by": "arena"}],
            }
        )

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "model": served})

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    if allow_reload:
        routes += reload_routes(model)  # type: ignore[arg-type]  (checked above)
    return Starlette(routes=routes)


@asynccontextmanager
async def serving(app: Any, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Run `app` under uvicorn while the block runs; yields its base URL (port 0 = any free port)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    bound = sock.getsockname()[1]
    ready = anyio.Event()

    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            ready.set()

    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        await ready.wait()
        try:
            yield f"http://{host}:{bound}"
        finally:
            server.should_exit = True
    sock.close()
