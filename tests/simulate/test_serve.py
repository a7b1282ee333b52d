"""`arena serve-model`'s app over real HTTP on 127.0.0.1: the HTTP backend against the local one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import pytest

from arena.protocols import ModelError
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec
from ops.cli import build_cli
from simulate.http import HttpChatModel
from simulate.model_errors import ModelRequestError
from simulate.serve import create_app, serving

pytestmark = pytest.mark.anyio

WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def few_shot_weather() -> list[Message]:
    """A conversation in which the small model reliably continues the tool-calling pattern."""
    messages = [
        Message(role="system", content="You are a weather assistant. Always answer by calling a tool.")
    ]
    for i, city in enumerate(["Rome", "Berlin", "Madrid"]):
        messages.append(Message(role="user", content=f"What is the weather in {city}?"))
        call = ToolCall(id=f"c{i}", name="get_weather", arguments={"city": city})
        messages.append(Message(role="assistant", tool_calls=[call]))
    messages.append(Message(role="user", content="What is the weather in Paris?"))
    return messages


@pytest.mark.model
async def test_http_backend_against_serve_model(local_model) -> None:
    app = create_app(local_model, name="smol")
    question = [Message(role="user", content="What is the capital of France?")]
    greedy = SamplingParams(max_tokens=6, logprobs=True)
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 16}, "sunny": {"type": "boolean"}},
        "required": ["city", "sunny"],
        "additionalProperties": False,
    }
    async with serving(app) as url, HttpChatModel(url, "smol", retries=0) as remote:
        results: dict[str, Completion] = {}

        async def ask(
            key: str, messages: list[Message], tools: list[ToolSpec] | None, params: SamplingParams
        ) -> None:
            results[key] = await remote.chat(messages, tools=tools, params=params)

        # Concurrent requests over HTTP are batched by the server's local backend.
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "plain", question, None, greedy)
            tg.start_soon(ask, "tool", few_shot_weather(), [WEATHER], SamplingParams(max_tokens=40))
            tg.start_soon(
                ask,
                "json",
                [Message(role="user", content="Weather in Oslo as JSON.")],
                None,
                SamplingParams(max_tokens=30, json_schema=schema),
            )
        direct = await local_model.chat(question, params=greedy)

        plain = results["plain"]
        assert plain.text == direct.text and plain.finish_reason == "length"
        assert plain.prompt_token_ids == direct.prompt_token_ids
        assert plain.completion_token_ids == direct.completion_token_ids
        assert plain.completion_logprobs == pytest.approx(direct.completion_logprobs, abs=1e-3)
        assert plain.model == "smol" and plain.usage.completion_tokens == 6

        tool = results["tool"]
        assert tool.finish_reason == "tool_calls", tool.text
        assert [(c.name, c.arguments) for c in tool.tool_calls] == [("get_weather", {"city": "Paris"})]
        assert tool.tool_calls[0].id.startswith("call_")

        jsonschema.validate(json.loads(results["json"].text), schema)

        # n samples, seeded, with the raw wire format.
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            response = await http.post(
                "/v1/chat/completions",
                json={
                    "model": "smol",
                    "messages": [{"role": "user", "content": "hi"}],
                    "n": 2,
                    "max_tokens": 3,
                    "temperature": 1.0,
                    "seed": 1,
                    "logprobs": True,
                    "return_token_ids": True,
                },
            )
            body = response.json()
            assert response.status_code == 200, body
            assert [c["index"] for c in body["choices"]] == [0, 1]
            assert all(
                len(c["token_ids"]) == 3 and len(c["logprobs"]["content"]) == 3 for c in body["choices"]
            )
            assert body["usage"]["completion_tokens"] == 6 and body["prompt_token_ids"]


class ScriptedFakeChatModel:
    """Returns a fixed completion text (or raises) — for the server's control flow, no model."""

    name = "scripted"

    def __init__(self, text: str = "hello", error: ModelError | None = None) -> None:
        self.text = text
        self.error = error
        self.params: list[SamplingParams] = []

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        self.params.append(params or SamplingParams())
        if self.error is not None:
            raise self.error
        return Completion(text=self.text, completion_token_ids=[1, 2], prompt_token_ids=[3])


async def post(app: Any, body: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        if isinstance(body, str):
            return await http.post("/v1/chat/completions", content=body)
        return await http.post("/v1/chat/completions", json=body)


MSG = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ("{not json", 400, "not valid JSON"),
        ({"messages": []}, 400, "messages"),
        ({"model": "scripted"}, 400, "messages: Field required"),
        ({"messages": MSG, "stream_options": {"include_usage": True}}, 400, "only allowed with stream=true"),
        ({"messages": MSG, "tool_choice": "required"}, 400, "tool_choice 'required' needs at least one tool"),
        ({"messages": MSG, "tool_choice": "any"}, 400, "tool_choice"),
        ({"messages": MSG, "n": 0}, 400, "n: "),
        ({"messages": MSG, "temperature": -1}, 400, "temperature"),
        (
            {"messages": MSG, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            400,
            "schema",
        ),
        ({"messages": MSG, "response_format": {"type": "yaml"}}, 400, "response_format"),
        (
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}
                ]
            },
            400,
            "messages[0].tool_calls[0].function.arguments is not valid JSON",
        ),
        ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "role"),
        ({"messages": MSG, "model": "gpt-9"}, 404, "model 'gpt-9' not found"),
    ],
)
async def test_bad_requests_get_clear_errors(body: Any, status: int, fragment: str) -> None:
    response = await post(create_app(ScriptedFakeChatModel()), body)
    assert response.status_code == status
    error = response.json()["error"]
    assert fragment in error["message"]


async def test_model_errors_map_to_400_or_500() -> None:
    bad = create_app(ScriptedFakeChatModel(error=ModelRequestError("the prompt is 9000 tokens")))
    response = await post(bad, {"messages": MSG})
    assert response.status_code == 400 and "9000 tokens" in response.json()["error"]["message"]
    broken = create_app(ScriptedFakeChatModel(error=ModelError("decode crashed")))
    response = await post(broken, {"messages": MSG})
    assert response.status_code == 500 and response.json()["error"]["type"] == "server_error"


async def test_tool_call_text_becomes_native_calls_unless_malformed() -> None:
    tools = [WEATHER.openai()]
    good = ScriptedFakeChatModel(
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    body = (await post(create_app(good), {"messages": MSG, "tools": tools})).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me check."
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {
        "city": "Oslo"
    }

    # tool_choice "none": the text is returned as is.
    body = (await post(create_app(good), {"messages": MSG, "tools": tools, "tool_choice": "none"})).json()
    assert "tool_calls" not in body["choices"][0]["message"] and body["choices"][0]["finish_reason"] == "stop"

    malformed = ScriptedFakeChatModel(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'
    )
    body = (await post(create_app(malformed), {"messages": MSG, "tools": tools})).json()
    assert "tool_calls" not in body["choices"][0]["message"]
    assert body["choices"][0]["message"]["content"] == malformed.text


async def test_request_options_reach_the_model_and_models_and_health_answer() -> None:
    model = ScriptedFakeChatModel()
    app = create_app(model, aliases=("alias",))
    await post(
        app,
        {
            "model": "alias",
            "messages": MSG,
            "max_completion_tokens": 7,
            "stop": "x",
            "seed": 4,
            "response_format": {"type": "json_object"},
            "temperature": 0,
        },
    )
    p = model.params[0]
    assert (p.max_tokens, p.stop, p.seed, p.json_schema, p.temperature) == (
        7,
        ["x"],
        4,
        {"type": "object"},
        0,
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        models = (await http.get("/v1/models")).json()
        assert [m["id"] for m in models["data"]] == ["scripted"]
        assert (await http.get("/health")).status_code == 200


async def test_reload_endpoints_load_weights_and_name_bad_requests(tmp_path: Path, reloadable_model) -> None:
    model = reloadable_model
    assert "/collective_rpc" not in [r.path for r in create_app(model).routes]  # only when allowed
    with pytest.raises(ValueError, match="cannot reload weights"):
        create_app(ScriptedFakeChatModel(), allow_reload=True)
    (tmp_path / "model.safetensors").write_bytes(b"w")
    transport = httpx.ASGITransport(app=create_app(model, allow_reload=True))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:

        async def rpc(body: object) -> tuple[int, str]:
            response = await http.post("/collective_rpc", json=body)
            return response.status_code, response.json().get("error", {}).get("message", "")

        assert await rpc({"method": "reload_weights", "kwargs": {"weights_path": str(tmp_path)}}) == (200, "")
        assert (await http.post("/reset_prefix_cache")).status_code == 200
        assert await rpc({"kwargs": {}}) == (400, "method: Field required")
        assert (await rpc({"method": "sleep"}))[1] == "only method 'reload_weights' is served, got 'sleep'"
        assert "weights_path" in (await rpc({"method": "reload_weights"}))[1]
        missing = tmp_path / "nowhere"
        assert await rpc({"method": "reload_weights", "kwargs": {"weights_path": str(missing)}}) == (
            400,
            f"weights_path {missing} is not a folder",
        )
        assert await rpc({"method": "reload_weights", "kwargs": {"weights_path": "/"}}) == (
            400,
            "no safetensors weights at /",
        )
        bad = await http.post("/collective_rpc", content=b"{not json")
        assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]
    assert model.loaded == [tmp_path] and model.resets == 1


def test_cli_registers_serve_model_and_bench_model() -> None:
    cli = build_cli()
    args = cli.parser.parse_args(["serve-model", "--model", "embedded", "--port", "8123"])
    assert (args.model, args.port, args.host) == ("embedded", 8123, "127.0.0.1")
    args = cli.parser.parse_args(["bench", "model", "--json", "--concurrency", "1,4", "--dtype", "bfloat16"])
    assert args.json and args.concurrency == "1,4" and args.dtype == "bfloat16"
    assert cli.parser.parse_args(["bench", "model"]).dtype is None


def test_cli_rejects_bad_options_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    from ops.cli import main

    assert main(["bench", "model", "--concurrency", "1,x"]) == 2
    assert "--concurrency wants comma-separated integers" in capsys.readouterr().err
    assert main(["serve-model", "--model", "/no/such/folder", "--port", "0"]) == 2
    assert "not a model folder" in capsys.readouterr().err
    assert main(["serve-model", "--host", "0.0.0.0", "--allow-reload"]) == 2
    assert "use a loopback --host, not 0.0.0.0" in capsys.readouterr().err
