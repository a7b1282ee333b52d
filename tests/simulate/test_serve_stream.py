"""The model server's OpenAI parity without a model: streams, tool choice, call ids, errors, completions.

Scripted fakes stand in for the model; the embedded model's real tokenizer splits the texts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from arena.types import Completion, Message, SamplingParams, ToolSpec, Usage
from simulate.decoding import DecodeRequest, DecodeResult
from simulate.serve import create_app
from simulate.serve_stream import token_pieces

pytestmark = pytest.mark.anyio

CALL_ID = re.compile(r"^call_[0-9a-f]{24}$")
ASK = [{"role": "user", "content": "weather?"}]


def tool(name: str, *, strict: bool | None = None) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": name,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


def hermes(name: str, city: str, *, closed: bool = True) -> str:
    block = f'<tool_call>\n{{"name": "{name}", "arguments": {{"city": "{city}"}}}}\n'
    return block + "</tool_call>" if closed else block


@pytest.fixture(scope="module")
def tokenizer(embedded_model_path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_model_path)


class TurnScript:
    """Answers each chat call with the next scripted text; records the tools and params it was given."""

    name = "scripted"

    def __init__(self, *texts: str, finish: str = "stop") -> None:
        self.texts = list(texts)
        self.finish = finish
        self.calls: list[tuple[list[str], SamplingParams]] = []

    async def chat(self, messages: list[Message], **options: Any) -> Completion:
        tools: list[ToolSpec] = options.get("tools") or []
        self.calls.append(([t.name for t in tools], options.get("params") or SamplingParams()))
        text = self.texts[min(len(self.calls), len(self.texts)) - 1]
        return Completion(
            text=text,
            finish_reason=self.finish,  # type: ignore[arg-type]
            prompt_token_ids=[5, 6],
            completion_token_ids=[1, 2],
            completion_logprobs=[-0.5, -0.25],
            usage=Usage(prompt_tokens=2, completion_tokens=2),
        )


async def call(app: Any, method: str, path: str, body: Any = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        return await http.request(method, path, json=body)


def events(response: httpx.Response) -> list[Any]:
    """The payloads of a server-sent event stream; `[DONE]` as the string."""
    assert response.headers["content-type"].startswith("text/event-stream")
    out = []
    for block in response.text.split("\n\n"):
        if block:
            assert block.startswith("data: "), block
            data = block.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_token_pieces_follow_the_tokens_and_hold_back_split_characters(tokenizer: Any) -> None:
    text = "Café au lait ☕ costs 3€ 🚀!"
    ids = [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
    pieces = token_pieces(tokenizer, ids, text)
    assert pieces is not None and len(pieces) == len(ids) and "".join(pieces) == text
    assert not any("\ufffd" in p for p in pieces)
    assert "" in pieces[:-1]  # an emoji spans several byte tokens: only the last carries it
    assert pieces[-1] == ""  # the stop token has no text
    # A stop string cut the text: later tokens get nothing.
    cut = token_pieces(tokenizer, ids, text[:9])
    assert cut is not None and "".join(cut) == "Café au l" and cut[-3:] == ["", "", ""]
    assert token_pieces(tokenizer, ids, "another text") is None
    assert token_pieces(None, ids, text) is None


async def test_a_streamed_tool_call_arrives_as_openai_chunks() -> None:
    model = TurnScript("Checking.\n" + hermes("get_weather", "Oslo, Norway"))
    body = {
        "messages": ASK,
        "tools": [tool("get_weather")],
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
        "return_token_ids": True,
    }
    got = events(await call(create_app(model), "POST", "/v1/chat/completions", body))
    assert got[-1] == "[DONE]"
    chunks = got[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
    assert chunks[0]["prompt_token_ids"] == [5, 6] and all("prompt_token_ids" not in c for c in chunks[1:])
    usage, chunks = chunks[-1], chunks[:-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 2
    assert all(c["usage"] is None for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("content") or "" for d in deltas) == "Checking."
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert CALL_ID.match(calls[0]["id"]) and calls[0]["function"]["name"] == "get_weather"
    assert all("id" not in c for c in calls[1:]) and {c["index"] for c in calls} == {0}
    assert len(calls) > 2  # the arguments come in fragments
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"city": "Oslo, Norway"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == [1, 2]
    logprobs = [e["logprob"] for c in chunks for e in c["choices"][0]["logprobs"]["content"]]
    assert logprobs == [-0.5, -0.25]


async def test_tool_choice_modes_shape_what_the_model_is_asked() -> None:
    tools = [tool("get_weather"), tool("get_time")]

    async def ask(model: TurnScript, **extra: Any) -> dict[str, Any]:
        response = await call(create_app(model), "POST", "/v1/chat/completions", {"messages": ASK, **extra})
        assert response.status_code == 200, response.text
        return response.json()["choices"][0]

    # Named: only that tool is shown, a call is required and constrained, the output ends with it;
    # the `</tool_call>` stop string is cut from the text and put back before parsing.
    named = TurnScript(hermes("get_time", "Rome", closed=False))
    choice = await ask(named, tools=tools, tool_choice={"type": "function", "function": {"name": "get_time"}})
    shown, params = named.calls[0]
    assert shown == ["get_time"] and params.require_tool_call and params.constrain_tool_calls
    assert params.stop == ["</tool_call>"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "get_time"

    required = TurnScript(hermes("get_weather", "Rome"))
    await ask(required, tools=tools, tool_choice="required", stop="x")
    shown, params = required.calls[0]
    assert shown == ["get_weather", "get_time"] and params.require_tool_call and params.stop == ["x"]

    auto = TurnScript(hermes("get_weather", "Rome"))
    await ask(auto, tools=tools, parallel_tool_calls=False)
    _, params = auto.calls[0]
    assert not params.require_tool_call and not params.constrain_tool_calls
    assert params.stop == ["</tool_call>"]
    strict = TurnScript("no call")
    await ask(strict, tools=[tool("get_weather", strict=True), tool("get_time")], tool_choice="auto")
    assert strict.calls[0][1].constrain_tool_calls and not strict.calls[0][1].require_tool_call

    none = TurnScript(hermes("get_weather", "Rome"))
    choice = await ask(none, tools=tools, tool_choice="none")
    assert (
        choice["message"]["content"] == hermes("get_weather", "Rome")
        and "tool_calls" not in choice["message"]
    )

    response = await call(
        create_app(TurnScript()),
        "POST",
        "/v1/chat/completions",
        {"messages": ASK, "tools": tools, "tool_choice": {"type": "function", "function": {"name": "fly"}}},
    )
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "tool_choice names function 'fly', which is not among the tools "
        "(offered: 'get_weather', 'get_time')",
        "type": "invalid_request_error",
        "param": "tool_choice",
        "code": 400,
    }


async def test_every_tool_call_gets_its_own_id() -> None:
    model = TurnScript(hermes("get_weather", "Rome") + "\n" + hermes("get_time", "Rome"))
    app = create_app(model)
    ids = []
    for _ in range(2):
        response = await call(
            app, "POST", "/v1/chat/completions", {"messages": ASK, "tools": [tool("get_weather")]}
        )
        ids += [c["id"] for c in response.json()["choices"][0]["message"]["tool_calls"]]
    assert len(ids) == 4 and len(set(ids)) == 4 and all(CALL_ID.match(i) for i in ids)


@pytest.mark.parametrize(
    ("method", "path", "status", "kind", "message"),
    [
        ("GET", "/nowhere", 404, "not_found_error", "no route GET /nowhere"),
        ("POST", "/v1/embeddings", 404, "not_found_error", "no route POST /v1/embeddings"),
        ("GET", "/v1/chat/completions", 405, "invalid_request_error", "method GET is not allowed"),
        ("GET", "/v1/models/gpt-9", 404, "not_found_error", "model 'gpt-9' not found"),
        ("POST", "/v1/completions", 404, "not_found_error", "has no local decode loop"),
    ],
)
async def test_every_failure_has_openai_error_shape(
    method: str, path: str, status: int, kind: str, message: str
) -> None:
    body = {"prompt": "hi"} if method == "POST" else None
    response = await call(create_app(TurnScript()), method, path, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == kind and message in error["message"] and error["code"] == status


class RawScript:
    """A raw-prompt completer (as `LocalChatModel`) whose batcher answers with scripted tokens."""

    name = "raw"
    context_length = 64

    def __init__(self, tokenizer: Any, text: str) -> None:
        self.tokenizer = tokenizer
        self.model = SimpleNamespace(config=SimpleNamespace(vocab_size=len(tokenizer)))
        self.batcher = self
        self.ids = [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
        self.text = text
        self.requests: list[DecodeRequest] = []

    async def submit(self, request: DecodeRequest) -> DecodeResult:
        self.requests.append(request)
        logprobs = [-float(i) for i in range(len(self.ids))]
        return DecodeResult(list(self.ids), logprobs, self.text, "stop")

    async def chat(self, *args: Any, **kwargs: Any) -> Completion:
        raise AssertionError("completions never go through chat")


async def test_completions_take_text_or_token_ids_and_return_both(tokenizer: Any) -> None:
    model = RawScript(tokenizer, "Paris ☕.")
    app = create_app(model)
    body = {
        "prompt": [[7, 8, 9], "The capital"],
        "n": 2,
        "max_tokens": 5,
        "logprobs": 0,
        "return_token_ids": True,
    }
    response = await call(app, "POST", "/v1/completions", body)
    answer = response.json()
    assert response.status_code == 200, answer
    assert answer["object"] == "text_completion" and [c["index"] for c in answer["choices"]] == [0, 1, 2, 3]
    prompts = [r.prompt_ids for r in model.requests]
    text_ids = tokenizer("The capital")["input_ids"]
    assert prompts == [[7, 8, 9], [7, 8, 9], text_ids, text_ids]
    assert [r.max_new_tokens for r in model.requests] == [5] * 4
    first = answer["choices"][0]
    assert first["prompt_token_ids"] == [7, 8, 9] and answer["choices"][2]["prompt_token_ids"] == text_ids
    assert (
        first["text"] == "Paris ☕." and first["token_ids"] == model.ids and first["finish_reason"] == "stop"
    )
    logprobs = first["logprobs"]
    assert logprobs["token_logprobs"] == [-float(i) for i in range(len(model.ids))]
    assert [next(iter(d)) for d in logprobs["top_logprobs"]] == logprobs["tokens"]
    assert logprobs["text_offset"][0] == 0 and logprobs["text_offset"] == sorted(logprobs["text_offset"])
    assert answer["usage"] == {
        "prompt_tokens": 3 + len(text_ids),
        "completion_tokens": 4 * len(model.ids),
        "total_tokens": 3 + len(text_ids) + 4 * len(model.ids),
    }

    # Streamed: pieces of text, ids and logprobs that add up to the same answer.
    body = {"prompt": [7, 8, 9], "logprobs": 0, "return_token_ids": True, "stream": True, "echo": False}
    got = events(await call(app, "POST", "/v1/completions", body))
    assert got[-1] == "[DONE]"
    choices = [c["choices"][0] for c in got[:-1]]
    assert choices[0]["prompt_token_ids"] == [7, 8, 9] and all(
        "prompt_token_ids" not in c for c in choices[1:]
    )
    assert "".join(c["text"] for c in choices) == "Paris ☕."
    assert [t for c in choices for t in c["token_ids"]] == model.ids
    assert [o for c in choices for o in c["logprobs"]["text_offset"]] == logprobs["text_offset"]
    assert [c["finish_reason"] for c in choices][-1] == "stop"

    echoed = await call(app, "POST", "/v1/completions", {"prompt": "The capital", "echo": True})
    assert echoed.json()["choices"][0]["text"] == "The capital" + "Paris ☕."
    await call(app, "POST", "/v1/completions", {"prompt": [1, 2], "max_tokens": None})
    assert model.requests[-1].max_new_tokens == 62  # the rest of the 64-token context


@pytest.mark.parametrize(
    ("body", "param", "fragment"),
    [
        ({"prompt": [1, 2], "logprobs": 2}, "logprobs", "send logprobs=0"),
        ({"prompt": [1, 10**9]}, "prompt", "outside the vocabulary"),
        ({"prompt": []}, "prompt", "1 to 64 prompts, got 0"),
        ({"prompt": ""}, "prompt", "prompt[0] is empty"),
        ({"prompt": list(range(64))}, "prompt", "the model's context is 64"),
        ({"prompt": "x", "echo": True, "logprobs": 0}, "echo", "prompt's logprobs"),
        ({"prompt": "x", "model": "other"}, "model", "model 'other' not found"),
        ({"prompt": {"text": "x"}}, None, "prompt"),
    ],
)
async def test_bad_completion_requests_name_the_problem(
    tokenizer: Any, body: dict[str, Any], param: str | None, fragment: str
) -> None:
    model = RawScript(tokenizer, "x")
    response = await call(create_app(model), "POST", "/v1/completions", body)
    assert response.status_code in (400, 404)
    error = response.json()["error"]
    assert error["param"] == param and fragment in error["message"]
    assert model.requests == []
