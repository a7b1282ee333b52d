"""`POST /v1/chat/completions` of the model server: the request, tool choice and the answer.

Hermes `<tool_call>` blocks in the output come back as native `message.tool_calls` (each with its
own `call_…` id) and `finish_reason: "tool_calls"`. `tool_choice` follows OpenAI:

- `none`: the text comes back as written, calls unparsed;
- `auto` (the default): the model decides; a cleanly parsed call becomes native, a malformed one
  stays raw text so an RL client's parser sees (and penalizes) what the model wrote. A function
  marked `strict` gets its calls constrained to the tools' schemas (what `HttpChatModel` asks for
  with `constrain_tool_calls`);
- `required`: the backend's constrained decoding must produce a schema-valid call;
- `{"type": "function", "function": {"name": N}}`: one call of N, constrained the same way. The
  model is shown only N, since the local backend compiles its grammar from the tools it is given.

`parallel_tool_calls: false` (and a named function) stops the output after the first call's
closing tag. `stream: true` answers with server-sent events (`simulate.serve_stream`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.episode.parser import CLOSE_TAG, OPEN_TAG, parse_tool_calls
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec
from simulate.generation_defaults import sampling_fields
from simulate.serve_stream import DONE, ChoiceParts, chat_chunk_choices, chat_message_choice, sse
from simulate.wire_errors import WireError

MAX_N = 16


class _Function(BaseModel):
    name: str
    arguments: str | dict[str, Any] = "{}"


class _WireToolCall(BaseModel):
    id: str = ""
    type: str = "function"
    function: _Function


class WireMessage(BaseModel):
    """One message of a chat request."""

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[_WireToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class _WireFunctionSpec(BaseModel):
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class _WireTool(BaseModel):
    type: Literal["function"] = "function"
    function: _WireFunctionSpec


class _ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class _FunctionName(BaseModel):
    name: str = Field(min_length=1)


class NamedToolChoice(BaseModel):
    """`tool_choice` naming the one function the model must call."""

    type: Literal["function"] = "function"
    function: _FunctionName


class StreamOptions(BaseModel):
    """`stream_options`: `include_usage` adds a last chunk with the token counts."""

    include_usage: bool = False


class ChatRequest(BaseModel):
    """The accepted subset of an OpenAI chat completion request."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[WireMessage] = Field(min_length=1)
    tools: list[_WireTool] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True
    n: int = Field(default=1, ge=1, le=MAX_N)
    # Sampling fields left out come from the model's generation config (`simulate.generation_defaults`).
    temperature: float | None = Field(default=None, ge=0.0, le=5.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, le=10.0)
    max_tokens: int | None = Field(default=None, ge=1, le=32768)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=32768)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=0)
    response_format: _ResponseFormat | None = None
    return_token_ids: bool = False
    # vLLM's extra: arguments for the chat template (Qwen3's enable_thinking), replacing the model's own.
    chat_template_kwargs: dict[str, Any] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None


def _content(value: str | list[dict[str, Any]] | None) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return "".join(str(part.get("text", "")) for part in value if part.get("type", "text") == "text")


def to_messages(wire: list[WireMessage]) -> list[Message]:
    """Convert request messages to Arena messages; `WireError` naming the offending field."""
    out: list[Message] = []
    for i, m in enumerate(wire):
        calls: list[ToolCall] = []
        for j, c in enumerate(m.tool_calls or []):
            where = f"messages[{i}].tool_calls[{j}].function.arguments"
            args: Any = c.function.arguments
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError as exc:
                    raise WireError(f"{where} is not valid JSON", param=where) from exc
            if not isinstance(args, dict):
                raise WireError(f"{where} must be a JSON object", param=where)
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
        raise WireError(
            "response_format.json_schema.schema must be a JSON schema object", param="response_format"
        )
    return schema


@dataclass(frozen=True)
class ToolPlan:
    """How a request's tools and `tool_choice` shape the call to the model and its answer."""

    tools: list[ToolSpec]  # what the model is shown (and constrained to)
    parse: bool = False  # Hermes blocks in the output become native tool calls
    constrain: bool = False  # calls are grammar-constrained to the tools' schemas
    require: bool = False  # the output must hold a call
    one_call: bool = False  # the output ends with the first call


def plan_tools(req: ChatRequest) -> ToolPlan:
    """The `ToolPlan` of `req`; `WireError` when `tool_choice` asks for a call it cannot make."""
    specs = [
        ToolSpec(name=t.function.name, description=t.function.description, parameters=t.function.parameters)
        for t in req.tools or []
    ]
    choice = req.tool_choice
    if isinstance(choice, NamedToolChoice):
        named = [s for s in specs if s.name == choice.function.name]
        if not named:
            offered = ", ".join(repr(s.name) for s in specs) or "none"
            raise WireError(
                f"tool_choice names function {choice.function.name!r}, which is not among the tools "
                f"(offered: {offered})",
                param="tool_choice",
            )
        return ToolPlan(named, parse=True, constrain=True, require=True, one_call=True)
    if choice == "required" and not specs:
        raise WireError("tool_choice 'required' needs at least one tool in tools", param="tool_choice")
    if not specs or choice == "none":
        return ToolPlan(specs)
    strict = any(t.function.strict for t in req.tools or [])
    one = not req.parallel_tool_calls
    if choice == "required":
        return ToolPlan(specs, parse=True, constrain=True, require=True, one_call=one)
    return ToolPlan(specs, parse=True, constrain=strict, one_call=one)


def sampling_params(
    req: ChatRequest, plan: ToolPlan, sample: int, defaults: dict[str, Any] | None = None
) -> SamplingParams:
    """The backend's sampling parameters for sample number `sample` of `req` (`defaults`: the served
    model's generation config, `simulate.generation_defaults`)."""
    defaults = defaults or {}
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    if plan.one_call:
        stops.append(CLOSE_TAG)
    return SamplingParams(
        **sampling_fields(req, defaults),
        max_tokens=req.max_completion_tokens or req.max_tokens or defaults.get("max_tokens", 256),
        stop=stops,
        seed=None if req.seed is None else req.seed + sample,
        logprobs=req.logprobs,
        json_schema=_schema(req.response_format),
        constrain_tool_calls=plan.constrain,
        require_tool_call=plan.require,
    )


def new_call_id() -> str:
    """A tool-call id unique across answers, in OpenAI's `call_…` form."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _wire_call(call: ToolCall) -> dict[str, Any]:
    # Fresh ids always: the backend's (the Hermes parser's `call_0`, `call_1`, …) repeat across
    # answers, and clients key tool results by id over a whole conversation.
    return {
        "id": new_call_id(),
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }


def choice_parts(index: int, completion: Completion, plan: ToolPlan) -> ChoiceParts:
    """The answer's choice `index` made of `completion`, tool calls parsed as `plan` says."""
    text = completion.text
    if plan.one_call and completion.finish_reason == "stop" and text.rfind(OPEN_TAG) > text.rfind(CLOSE_TAG):
        # The stop string `</tool_call>` ended the call and is cut from the text; put it back.
        text += CLOSE_TAG
    parts = ChoiceParts(
        index=index,
        content=text,
        finish_reason=completion.finish_reason,
        token_ids=list(completion.completion_token_ids or []),
        logprobs=completion.completion_logprobs,
    )
    if plan.parse and completion.tool_calls:
        parts.tool_calls = [_wire_call(c) for c in completion.tool_calls]
        parts.content = completion.text or None
    elif plan.parse:
        turn = parse_tool_calls(text)
        # Only a cleanly parsed turn becomes native calls; anything malformed stays raw text so
        # the client's parser sees (and penalizes) exactly what the model wrote.
        if turn.calls and not turn.errors:
            parts.tool_calls = [_wire_call(c) for c in turn.calls]
            parts.content = turn.content or None
    if parts.tool_calls:
        parts.finish_reason = "tool_calls"
        parts.content_is_text = False
    return parts


def usage(prompt_tokens: int, completions: list[Completion]) -> dict[str, int]:
    """The `usage` object of an answer with these completions of one prompt."""
    generated = sum(c.usage.completion_tokens for c in completions)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": generated,
        "total_tokens": prompt_tokens + generated,
    }


def chat_body(
    req: ChatRequest, plan: ToolPlan, done: list[Completion], *, served: str, tokenizer: Any
) -> dict[str, Any]:
    """The whole `chat.completion` answer."""
    first = done[0]
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": served,
        "choices": [
            chat_message_choice(choice_parts(i, c, plan), tokenizer, token_ids=req.return_token_ids)
            for i, c in enumerate(done)
        ],
        "usage": usage(first.usage.prompt_tokens, done),
    }
    if req.return_token_ids:
        body["prompt_token_ids"] = first.prompt_token_ids
    return body


async def chat_events(
    req: ChatRequest, plan: ToolPlan, done: list[Completion], *, served: str, tokenizer: Any
) -> AsyncIterator[str]:
    """The answer as `chat.completion.chunk` events, then `[DONE]`."""
    head: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": served,
    }
    include_usage = req.stream_options is not None and req.stream_options.include_usage
    if include_usage:
        head["usage"] = None  # as OpenAI: present on every chunk, filled only on the last
    first = True
    for i, completion in enumerate(done):
        parts = choice_parts(i, completion, plan)
        for choice in chat_chunk_choices(parts, tokenizer, token_ids=req.return_token_ids):
            event = {**head, "choices": [choice]}
            if first and req.return_token_ids:
                # vLLM sends the prompt's ids once, on the first chunk.
                event["prompt_token_ids"] = completion.prompt_token_ids
            first = False
            yield sse(event)
    if include_usage:
        yield sse({**head, "choices": [], "usage": usage(done[0].usage.prompt_tokens, done)})
    yield DONE
