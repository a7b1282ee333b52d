"""The official `openai` client against `arena serve-model`'s app over the real embedded model.

One server, two rounds of concurrent requests (the local backend batches them): chat with a
named function (streamed), `required` and `auto`, then raw completions fed the token ids the
chat answer reported. Short outputs keep it to a few decode batches on CPU.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import jsonschema
import openai
import pytest

from simulate.serve import create_app, serving

pytestmark = [pytest.mark.anyio, pytest.mark.model]

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": CITY},
    },
    {
        "type": "function",
        "function": {"name": "get_time", "description": "Local time in a city.", "parameters": CITY},
    },
]


def few_shot() -> list[Any]:
    """A conversation the small model continues with a get_weather call (as `tool_choice: auto` needs)."""
    messages: list[Any] = [
        {"role": "system", "content": "You are a weather assistant. Always answer by calling a tool."}
    ]
    for i, city in enumerate(["Rome", "Berlin", "Madrid"]):
        messages.append({"role": "user", "content": f"What is the weather in {city}?"})
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "sunny"})
    messages.append({"role": "user", "content": "What is the weather in Paris?"})
    return messages


async def test_openai_client_streams_tool_calls_and_completes_token_ids(local_model) -> None:
    greedy: dict[str, Any] = {"model": "smol", "temperature": 0, "max_tokens": 48}
    hello = [{"role": "user", "content": "Hello! Who are you?"}]
    # The client is closed here: an unclosed openai client schedules its own close on whichever
    # loop runs when it is garbage-collected, which fails a later test on this worker.
    async with (
        serving(create_app(local_model, name="smol")) as url,
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=600) as client,
    ):
        answers: dict[str, Any] = {}

        async def streamed() -> None:
            stream = await client.chat.completions.create(
                **greedy,
                messages=hello,
                tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "get_time"}},
                stream=True,
                stream_options={"include_usage": True},
                extra_body={"return_token_ids": True},
            )
            answers["stream"] = [chunk async for chunk in stream]

        def chat(key: str, messages: list[Any], **options: Any) -> Callable[[], Awaitable[None]]:
            async def ask() -> None:
                answers[key] = await client.chat.completions.create(**greedy, messages=messages, **options)

            return ask

        async with anyio.create_task_group() as tg:
            tg.start_soon(streamed)
            tg.start_soon(
                chat("required", hello, tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
            )
            tg.start_soon(chat("auto", few_shot(), tools=TOOLS, extra_body={"return_token_ids": True}))

        # The stream: a get_time call assembled from deltas, as an agent framework would.
        chunks = answers["stream"]
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        calls: dict[int, dict[str, str]] = {}
        for chunk in chunks[:-1]:
            for delta_call in chunk.choices[0].delta.tool_calls or []:
                entry = calls.setdefault(delta_call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += delta_call.id or ""
                entry["name"] += (delta_call.function and delta_call.function.name) or ""
                entry["arguments"] += (delta_call.function and delta_call.function.arguments) or ""
        assert chunks[-2].choices[0].finish_reason == "tool_calls"
        assert list(calls) == [0] and calls[0]["name"] == "get_time"
        jsonschema.validate(json.loads(calls[0]["arguments"]), CITY)
        streamed_ids = [t for c in chunks[:-1] for t in c.choices[0].model_extra.get("token_ids", [])]
        assert len(streamed_ids) == chunks[-1].usage.completion_tokens
        assert local_model.tokenizer.decode(streamed_ids).endswith("</tool_call>")

        # required: a schema-valid call of one of the tools, and the output ends with it.
        required = answers["required"].choices[0]
        assert required.finish_reason == "tool_calls" and len(required.message.tool_calls) == 1
        forced = required.message.tool_calls[0].function
        assert forced.name in {"get_weather", "get_time"}
        jsonschema.validate(json.loads(forced.arguments), CITY)

        # auto follows the conversation's pattern (none is pinned without a model, in test_serve_stream).
        auto = answers["auto"].choices[0]
        assert auto.finish_reason == "tool_calls", auto.message.content
        assert [(c.function.name, json.loads(c.function.arguments)) for c in auto.message.tool_calls] == [
            ("get_weather", {"city": "Paris"})
        ]

        ids = [calls[0]["id"], required.message.tool_calls[0].id, auto.message.tool_calls[0].id]
        assert len(set(ids)) == 3 and all(i.startswith("call_") for i in ids)

        # Raw completions fed the chat answer's prompt ids continue it token for token.
        prompt_ids = answers["auto"].model_extra["prompt_token_ids"]
        chat_ids = answers["auto"].choices[0].model_extra["token_ids"]
        raw: dict[str, Any] = {"model": "smol", "temperature": 0, "max_tokens": 6, "logprobs": 0}
        done: dict[str, Any] = {}

        def complete(key: str, **options: Any) -> Callable[[], Awaitable[None]]:
            async def ask() -> None:
                extra = {"return_token_ids": True}
                done[key] = await client.completions.create(**raw, **options, extra_body=extra)

            return ask

        async with anyio.create_task_group() as tg:
            tg.start_soon(complete("batch", prompt=[prompt_ids, "The capital of France is"]))
            tg.start_soon(complete("stream", prompt=prompt_ids, stream=True))
        first, text = done["batch"].choices
        assert first.model_extra["prompt_token_ids"] == prompt_ids
        assert first.model_extra["token_ids"] == chat_ids[:6]
        assert len(first.logprobs.token_logprobs) == 6 and all(
            lp <= 0 for lp in first.logprobs.token_logprobs
        )
        assert (
            text.index == 1
            and text.model_extra["prompt_token_ids"]
            == local_model.tokenizer("The capital of France is")["input_ids"]
        )
        pieces = [chunk async for chunk in done["stream"]]
        assert "".join(p.choices[0].text for p in pieces) == first.text
        assert [t for p in pieces for t in p.choices[0].model_extra["token_ids"]] == chat_ids[:6]

        # Refusals come back as the client's typed errors, with OpenAI's error body.
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                **greedy,
                messages=hello,
                tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "fly"}},
            )
        assert refused.value.body["param"] == "tool_choice" and "'fly'" in refused.value.body["message"]
        with pytest.raises(openai.NotFoundError) as missing:
            await client.embeddings.create(model="smol", input="x")
        assert missing.value.body == {
            "message": "no route POST /v1/embeddings",
            "type": "not_found_error",
            "param": None,
            "code": 404,
        }
        with pytest.raises(openai.NotFoundError):
            await client.completions.create(model="gpt-9", prompt="x", max_tokens=1)
