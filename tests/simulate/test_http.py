"""The HTTP backend against tiny local servers that answer (and fail) on purpose. No model."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from arena.protocols import ModelError
from arena.types import Message, SamplingParams, ToolSpec
from simulate.backends import ModelSpec, build_chat_model
from simulate.breaker import CircuitBreaker
from simulate.http import HttpChatModel
from simulate.http_parse import parse_chat_response
from simulate.model_errors import ModelRequestError, ModelUnavailable
from simulate.serve import serving

pytestmark = pytest.mark.anyio

OK_BODY = {
    "model": "scripted",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1},
}
HI = [Message(role="user", content="hi")]


class ScriptedFakeServer:
    """Answers `/v1/chat/completions` from a script of (status, body, headers); then 200 forever."""

    def __init__(self, script: list[tuple[int, Any, dict[str, str]]] | None = None) -> None:
        self.script = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> JSONResponse:
        self.requests.append(await request.json())
        status, body, headers = self.script.pop(0) if self.script else (200, OK_BODY, {})
        return JSONResponse(body, status_code=status, headers=headers)


def client(url: str, **kwargs: Any) -> HttpChatModel:
    options: dict[str, Any] = {"backoff_s": 0.01, "backoff_max_s": 0.05, "retries": 3}
    options.update(kwargs)
    return HttpChatModel(url, "scripted", **options)


async def test_retries_5xx_and_429_then_succeeds() -> None:
    server = ScriptedFakeServer(
        [
            (500, {"error": {"message": "boom"}}, {}),
            (429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}),
            (503, {"detail": "warming up"}, {}),
        ]
    )
    async with serving(server.app) as url, client(url) as model:
        completion = await model.chat(HI, params=SamplingParams(max_tokens=4))
    assert completion.text == "hello"
    assert completion.usage.completion_tokens == 1
    assert len(server.requests) == 4
    body = server.requests[0]
    assert body["model"] == "scripted" and body["max_tokens"] == 4 and body["return_token_ids"] is True


async def test_gives_up_after_the_retries_with_the_last_error() -> None:
    server = ScriptedFakeServer([(502, {"error": {"message": "bad gateway"}}, {})] * 3)
    async with serving(server.app) as url, client(url, retries=2, breaker_threshold=10) as model:
        with pytest.raises(ModelUnavailable, match=r"after 3 attempts: 502 bad gateway"):
            await model.chat(HI)
    assert len(server.requests) == 3


async def test_other_4xx_fail_at_once_with_the_servers_message() -> None:
    server = ScriptedFakeServer([(400, {"error": {"message": "max_tokens is too large"}}, {})])
    async with serving(server.app) as url, client(url) as model:
        with pytest.raises(ModelRequestError, match="400 max_tokens is too large"):
            await model.chat(HI)
    assert len(server.requests) == 1


async def test_circuit_opens_fails_fast_and_half_opens_after_the_cooldown() -> None:
    now = [0.0]
    server = ScriptedFakeServer([(500, {}, {})] * 4)
    async with serving(server.app) as url:
        model = client(url, retries=0, breaker_threshold=3, breaker_cooldown_s=30, clock=lambda: now[0])
        async with model:
            for _ in range(3):
                with pytest.raises(ModelUnavailable, match="after 1 attempts"):
                    await model.chat(HI)
            assert model.breaker.state == "open"
            with pytest.raises(ModelUnavailable, match="circuit open"):
                await model.chat(HI)
            assert len(server.requests) == 3  # failing fast: nothing sent
            now[0] = 31.0
            assert model.breaker.state == "half_open"
            with pytest.raises(ModelUnavailable):  # the trial fails (4th scripted 500): open again
                await model.chat(HI)
            assert model.breaker.state == "open"
            now[0] = 62.0
            assert (await model.chat(HI)).text == "hello"  # the next trial succeeds: closed
            assert model.breaker.state == "closed"
    assert len(server.requests) == 5


def test_half_open_lets_a_single_trial_through() -> None:
    now = [0.0]
    breaker = CircuitBreaker(1, 10, clock=lambda: now[0])
    breaker.failure()
    now[0] = 11
    breaker.before_attempt("x")  # the trial
    with pytest.raises(ModelUnavailable, match="circuit open"):
        breaker.before_attempt("x")  # a second caller while the trial is in flight
    breaker.success()
    breaker.before_attempt("x")


async def test_connection_errors_are_retried_then_reported() -> None:
    # A port nobody listens on: bind, note it, close.
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    async with client(f"http://127.0.0.1:{port}/v1", retries=1) as model:
        with pytest.raises(ModelUnavailable, match="connection failed"):
            await model.chat(HI)


async def test_timeouts_are_retried() -> None:
    calls = []

    async def slow(request: Request) -> JSONResponse:
        calls.append(1)
        if len(calls) == 1:
            await anyio.sleep(1.0)
        return JSONResponse(OK_BODY)

    app = Starlette(routes=[Route("/v1/chat/completions", slow, methods=["POST"])])
    async with serving(app) as url, client(url, timeout_s=0.3) as model:
        assert (await model.chat(HI)).text == "hello"
    assert len(calls) == 2


def test_request_body_carries_tools_schema_and_sampling() -> None:
    model = HttpChatModel("http://x:1", "m", return_token_ids=False)
    tool = ToolSpec(name="f", description="d", parameters={"type": "object", "properties": {}})
    params = SamplingParams(
        temperature=0.7,
        top_p=0.9,
        max_tokens=9,
        stop=["\n"],
        seed=3,
        logprobs=True,
        json_schema={"type": "object"},
    )
    body = model.request_body(HI, [tool], params)
    assert body["tools"] == [tool.openai()] and body["tool_choice"] == "auto"
    assert body["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"], body["seed"]) == (
        0.7,
        0.9,
        9,
        ["\n"],
        3,
    )
    assert body["logprobs"] is True and "return_token_ids" not in body
    assert model.base_url == "http://x:1/v1"
    # Truncation fields go only when set (OpenAI's API refuses them) ...
    assert not {"top_k", "min_p", "repetition_penalty"} & set(body)
    assert model.request_body(HI, None, params.model_copy(update={"top_k": 5}))["top_k"] == 5
    # ... unless the client pins every field vLLM would fill from the model (the policy's server).
    pinned = HttpChatModel("http://x:1", "m", pin_sampling=True).request_body(HI, None, params)
    assert (pinned["top_k"], pinned["min_p"], pinned["repetition_penalty"]) == (0, 0.0, 1.0)


def test_response_parsing_accepts_vllm_and_variant_fields() -> None:
    vllm = {
        "model": "served",
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"a": 1}'}}
                    ],
                },
                "finish_reason": "tool_calls",
                "token_ids": [7, 8],
                "logprobs": {"content": [{"token": "x", "logprob": -0.5}, {"token": "y", "logprob": -1.0}]},
            }
        ],
    }
    c = parse_chat_response(vllm)
    assert (
        c.tool_calls[0].name == "get" and c.tool_calls[0].arguments == {"a": 1} and c.tool_calls[0].id == "c1"
    )
    assert c.finish_reason == "tool_calls" and c.text == ""
    assert c.prompt_token_ids == [1, 2, 3] and c.completion_token_ids == [7, 8]
    assert c.completion_logprobs == [-0.5, -1.0]
    assert c.usage.prompt_tokens == 3 and c.usage.completion_tokens == 2  # from the ids when no usage

    variant = {
        "choices": [
            {
                "message": {"content": [{"type": "text", "text": "hi"}]},
                "finish_reason": "length",
                "prompt_token_ids": [4],
                "completion_token_ids": [5],
            }
        ]
    }
    v = parse_chat_response(variant, model="m")
    assert (v.text, v.finish_reason, v.prompt_token_ids, v.completion_token_ids, v.model) == (
        "hi",
        "length",
        [4],
        [5],
        "m",
    )

    broken = {
        "choices": [
            {
                "message": {
                    "content": "",
                    "tool_calls": [{"function": {"name": "get", "arguments": "{not json"}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    b = parse_chat_response(broken)
    # A call that cannot be parsed goes back into the text for the episode runner to report.
    assert b.tool_calls == [] and b.finish_reason == "stop"
    assert b.text == '<tool_call>\n{"name": "get", "arguments": {not json}\n</tool_call>'

    with pytest.raises(ModelError, match="no choices"):
        parse_chat_response({"error": "x"})


async def test_non_json_success_body_is_a_model_error() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>"))
    async with HttpChatModel("http://mock", "m", transport=transport) as model:
        with pytest.raises(ModelError, match="not JSON"):
            await model.chat(HI)


def test_model_spec_validation_and_factory() -> None:
    with pytest.raises(ValueError, match="needs base_url"):
        ModelSpec(backend="http", model="m")
    with pytest.raises(ValueError, match="http:// or https://"):
        ModelSpec(backend="http", model="m", base_url="ftp://x")
    with pytest.raises(ValueError, match="extra"):
        ModelSpec.model_validate({"backend": "local", "nonsense": 1})
    with pytest.raises(ValueError, match="extra"):
        ModelSpec.model_validate({"backend": "local", "role": "helper"})  # the role is not configuration
    spec = ModelSpec(backend="http", model="m", base_url="http://h:1/v1", api_key="k", max_retries=2)
    model = build_chat_model(spec, role="helper")
    assert isinstance(model, HttpChatModel)
    assert (model.name, model.role, model.retries) == ("m", "helper", 2) and not model.pin_sampling
    assert build_chat_model(spec).pin_sampling  # type: ignore[attr-defined]  (the policy, by default)
    assert json.dumps(spec.model_dump(mode="json")).count('"k"') == 0  # the key stays secret
