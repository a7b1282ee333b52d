"""The token-id client: each turn of a session extends the previous prompt and sampled ids exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.types import Message, SamplingParams, ToolCall
from simulate.token_chat import TokenChatModel, token_session

pytestmark = [pytest.mark.model, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_session_sends_the_sampled_ids_then_only_the_new_messages(embedded_model_path: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path))
    call = '<tool_call>\n{"name": "find", "arguments": {"q":  "x"}}\n</tool_call>'  # odd spacing on purpose
    sampled = [*tokenizer(call, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        choice = {
            "text": call,
            "token_ids": sampled,
            "prompt_token_ids": body["prompt"],
            "finish_reason": "stop",
        }
        choice["logprobs"] = {"token_logprobs": [-0.5] * len(sampled)}
        return httpx.Response(200, json={"choices": [choice], "model": "policy"})

    model = TokenChatModel("http://policy", "policy", tokenizer, transport=httpx.MockTransport(answer))
    first = [Message(role="system", content="Be brief."), Message(role="user", content="Find x.")]
    params = SamplingParams(temperature=1.0, logprobs=True)
    with token_session() as session:
        one = await model.chat(first, params=params)
        # The runner re-serializes the call (normal spacing): the chain must keep the sampled ids.
        reply = Message(
            role="assistant", content="", tool_calls=[ToolCall(id="c1", name="find", arguments={"q": "x"})]
        )
        result = Message(role="tool", content='{"hits": 1}', tool_call_id="c1", name="find")
        two = await model.chat([*first, reply, result], params=params)
    await model.aclose()
    assert sent[0]["prompt"] == model.renderer.prompt(first, None) and sent[0]["logprobs"] == 0
    assert one.completion_logprobs == [-0.5] * len(sampled) and one.text == call
    chain = [*one.prompt_token_ids, *one.completion_token_ids]
    assert two.prompt_token_ids[: len(chain)] == chain  # extends the chain: no re-rendering of turn 1
    rest = tokenizer.decode(two.prompt_token_ids[len(chain) :])
    assert rest.startswith('\n<|im_start|>user\n<tool_response>\n{"hits": 1}') and rest.endswith(
        "<|im_start|>assistant\n"
    )
    assert session.turns == 2 and session.rerendered == 0
    # Outside a session (or after a truncated history) the prompt is rendered whole.
    three = await TokenChatModel(
        "http://policy", "policy", tokenizer, transport=httpx.MockTransport(answer)
    ).chat([*first, reply, result], params=params)
    assert three.prompt_token_ids == model.renderer.prompt([*first, reply, result], None)


async def test_grammar_requests_are_refused(embedded_model_path: Path) -> None:
    from transformers import AutoTokenizer

    from arena.protocols import ModelError

    model = TokenChatModel("http://policy", "policy", AutoTokenizer.from_pretrained(str(embedded_model_path)))
    with pytest.raises(ModelError, match="without a grammar"):
        await model.chat(
            [Message(role="user", content="hi")], params=SamplingParams(json_schema={"type": "object"})
        )
