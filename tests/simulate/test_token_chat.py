"""The token-id client: each turn of a session extends the previous prompt and sampled ids exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.types import Message, SamplingParams, ToolCall
from simulate.token_chain import token_session
from simulate.token_chat import TokenChatModel

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


def test_every_field_vllm_fills_from_the_model_is_pinned(embedded_model_path: Path) -> None:
    from transformers import AutoTokenizer

    from simulate.generation_defaults import GENERATION_FIELDS

    model = TokenChatModel("http://policy", "policy", AutoTokenizer.from_pretrained(str(embedded_model_path)))
    params = SamplingParams(temperature=1.0, max_tokens=9)
    body = model.request_body([Message(role="user", content="hi")], None, params)
    assert {*GENERATION_FIELDS, "max_tokens"} <= set(body)
    assert (body["top_k"], body["min_p"], body["repetition_penalty"], body["max_tokens"]) == (0, 0.0, 1.0, 9)


def model_with_generation_config(source: Path, folder: Path, **settings: object) -> Path:
    """`source`'s weights and tokenizer with a generation_config.json that sets `settings`."""
    folder.mkdir()
    for item in source.iterdir():
        if item.name != "generation_config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((source / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "do_sample": True, **settings}))
    return folder


async def test_a_server_whose_model_sets_top_k_samples_the_full_softmax_for_token_id_requests(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """top_k 1 in generation_config.json: what the server samples when a request leaves top_k out
    (greedy, whatever the seed); the token-id client pins it, so its samples vary with the seed and
    carry the full softmax's log-probs."""
    import torch
    from transformers import AutoTokenizer

    from simulate.local import LocalChatModel
    from simulate.serve import create_app, serving

    folder = model_with_generation_config(embedded_model_path, tmp_path / "topk1", top_k=1)
    served = LocalChatModel.load(folder, device="cpu", dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    messages = [Message(role="user", content="Write one word about the sea.")]
    async with serving(create_app(served, name="policy")) as url:
        client = TokenChatModel(url + "/v1", "policy", tokenizer)
        prompt = client.renderer.prompt(messages, None)
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            unpinned = [
                (
                    await http.post(
                        "/v1/completions",
                        json={
                            "prompt": prompt,
                            "max_tokens": 8,
                            "temperature": 1.0,
                            "seed": s,
                            "return_token_ids": True,
                        },
                    )
                ).json()["choices"][0]["token_ids"]
                for s in range(4)
            ]
        pinned = [
            await client.chat(
                messages, params=SamplingParams(temperature=1.0, max_tokens=8, seed=s, logprobs=True)
            )
            for s in range(4)
        ]
        await client.aclose()
    assert len({tuple(ids) for ids in unpinned}) == 1  # the model's top_k 1: greedy at temperature 1
    assert len({tuple(c.completion_token_ids or []) for c in pinned}) > 1
    # The reported log-probs are the full softmax's (what the trainer scores), not top_k's zeros.
    first = pinned[0]
    ids = torch.tensor([[*first.prompt_token_ids, *first.completion_token_ids]])
    with torch.no_grad():
        logps = torch.log_softmax(served.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float(), -1)
    expected = logps.gather(-1, torch.tensor(first.completion_token_ids)[:, None]).squeeze(-1)
    assert torch.allclose(torch.tensor(first.completion_logprobs), expected, atol=1e-3)
