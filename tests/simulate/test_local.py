"""The local backend with the real embedded model: batching, sampling, JSON schemas, weights."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import jsonschema
import pytest

from arena.protocols import ChatModel, ModelError
from arena.types import Message, SamplingParams, ToolSpec
from simulate.calls import add_observer, with_role
from simulate.kv_reuse import MIN_REUSE, common_prefix
from simulate.model_errors import ModelRequestError

pytestmark = [pytest.mark.anyio, pytest.mark.model]

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about autumn leaves.",
    "List three fruits.",
    "hi",
]


def user(text: str) -> list[Message]:
    return [Message(role="user", content=text)]


async def test_concurrent_greedy_requests_equal_one_by_one(local_model) -> None:
    assert isinstance(local_model, ChatModel)
    params = SamplingParams(max_tokens=8, logprobs=True)
    alone = [await local_model.chat(user(p), params=params) for p in PROMPTS]
    batches_before = local_model.batcher.batches_run
    together: list = [None] * len(PROMPTS)

    async def one(i: int) -> None:
        together[i] = await local_model.chat(user(PROMPTS[i]), params=params)

    async with anyio.create_task_group() as tg:
        for i in range(len(PROMPTS)):
            tg.start_soon(one, i)
    # All of them went through one batched decode, which ran their shared system prompt once.
    assert local_model.batcher.batches_run - batches_before == 1
    ids = [a.prompt_token_ids for a in alone]
    assert min(common_prefix(ids[0], other) for other in ids[1:]) >= MIN_REUSE
    for a, b in zip(alone, together, strict=True):
        assert b.text == a.text
        assert b.completion_token_ids == a.completion_token_ids
        assert b.prompt_token_ids == a.prompt_token_ids
        assert b.completion_logprobs == pytest.approx(a.completion_logprobs, abs=1e-3)
        assert len(a.completion_logprobs) == len(a.completion_token_ids) == a.usage.completion_tokens
        assert all(lp <= 0 for lp in a.completion_logprobs)
        assert a.finish_reason in ("stop", "length")
    first = alone[0]
    # The prompt ids are the chat template's rendering; the text is the decoded completion.
    assert first.prompt_token_ids == local_model.render_prompt(user(PROMPTS[0]))
    assert "Paris" in first.text
    assert local_model.tokenizer.decode(first.completion_token_ids, skip_special_tokens=True).startswith(
        first.text
    )


async def test_max_tokens_stop_strings_and_seeded_sampling(local_model) -> None:
    short = await local_model.chat(user(PROMPTS[1]), params=SamplingParams(max_tokens=3))
    assert short.finish_reason == "length"
    assert len(short.completion_token_ids) == 3
    assert short.completion_logprobs is None  # not asked for

    stopped = await local_model.chat(user(PROMPTS[0]), params=SamplingParams(max_tokens=12, stop=[" of"]))
    assert stopped.finish_reason == "stop"
    assert stopped.text == "The capital"

    hot = SamplingParams(temperature=1.2, top_p=0.9, max_tokens=6, seed=7)
    a, b = [await local_model.chat(user(PROMPTS[3]), params=hot) for _ in range(2)]
    assert a.completion_token_ids == b.completion_token_ids


async def test_top_k_min_p_and_the_repetition_penalty_shape_what_is_sampled(local_model) -> None:
    async def ids(prompt: str, **params: object) -> tuple[int, ...]:
        done = await local_model.chat(user(prompt), params=SamplingParams(max_tokens=10, **params))
        return tuple(done.completion_token_ids or [])

    hot = {"temperature": 2.0}
    greedy = await ids(PROMPTS[3])
    assert len({await ids(PROMPTS[3], **hot, seed=s) for s in range(3)}) > 1  # plain sampling varies
    # Keeping one token (top_k 1, or min_p 1: only the likeliest) is greedy whatever the seed.
    assert {await ids(PROMPTS[3], **hot, seed=s, top_k=1) for s in range(2)} == {greedy}
    assert {await ids(PROMPTS[3], **hot, seed=s, min_p=1.0) for s in range(2)} == {greedy}
    # A list repeats its digits and line breaks: a penalty on seen tokens changes even greedy output.
    assert await ids(PROMPTS[2], repetition_penalty=5.0) != await ids(PROMPTS[2])


async def test_tools_are_rendered_into_the_prompt(local_model) -> None:
    tool = ToolSpec(
        name="get_weather",
        description="Get the current weather for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    ids = local_model.render_prompt(user("Weather in Paris?"), [tool])
    text = local_model.tokenizer.decode(ids)
    assert "\nget_weather(city): Get the current weather for a city.\n  city (string)\n" in text
    assert "<tool_call>" in text
    assert text.endswith("<|im_start|>assistant\n")


SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
            "score": {"type": "number"},
            "ok": {"type": "boolean"},
        },
        "required": ["verdict", "score", "ok"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string", "maxLength": 12},
                "minItems": 1,
                "maxItems": 3,
            },
        },
        "required": ["tags"],
        "additionalProperties": False,
    },
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
]


async def test_json_schema_output_always_validates(local_model) -> None:
    questions = [
        "Describe a person.",
        "Judge this answer: 2+2=4.",
        "Tag this text: I love pizza.",
        "Pick numbers.",
    ]
    results: list = [None] * len(SCHEMAS)

    async def one(i: int) -> None:
        # Greedy and sampled rows: the grammar must hold either way.
        params = SamplingParams(max_tokens=48, json_schema=SCHEMAS[i], temperature=(i % 2) * 1.0, seed=i)
        results[i] = await local_model.chat(user(questions[i] + " Answer in JSON."), params=params)

    async with anyio.create_task_group() as tg:  # constrained rows batch with each other
        for i in range(len(results)):
            tg.start_soon(one, i)
    for i, completion in enumerate(results):
        assert completion.finish_reason == "stop", completion.text
        jsonschema.validate(json.loads(completion.text), SCHEMAS[i])
        # The grammar's fixed JSON (the opening brace of an object, its keys) left the model no
        # choice: those positions are reported, the model's own choices are not.
        forced = completion.completion_forced
        assert forced and len(forced) < len(completion.completion_token_ids)
    free = await local_model.chat(user("Say hi."), params=SamplingParams(max_tokens=4))
    assert free.completion_forced == []


async def test_bad_requests_give_clear_errors(local_model) -> None:
    with pytest.raises(ModelRequestError, match="invalid json_schema"):
        await local_model.chat(
            user("x"), params=SamplingParams(max_tokens=2, json_schema={"type": "nonsense"})
        )
    with pytest.raises(ModelRequestError, match="context"):
        await local_model.chat(user("word " * 9000), params=SamplingParams(max_tokens=2))
    with pytest.raises(ModelRequestError, match="no messages"):
        await local_model.chat([], params=SamplingParams(max_tokens=2))


async def test_calls_are_counted_per_role(local_model) -> None:
    seen = []
    remove = add_observer(seen.append)
    try:
        await with_role(local_model, "judge").chat(user("hi"), params=SamplingParams(max_tokens=2))
        with pytest.raises(ModelError):
            await local_model.chat([], params=SamplingParams(max_tokens=2))
    finally:
        remove()
    assert [(r.role, r.backend, r.ok) for r in seen] == [("judge", "local", True), ("policy", "local", False)]
    assert seen[0].completion_tokens == 2 and seen[0].prompt_tokens > 0 and seen[0].latency_s > 0


async def test_trainer_can_swap_weights_and_generate_from_a_training_model(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import save_file

    from simulate.local import LocalChatModel

    model = LocalChatModel.load(embedded_model_path, device="cpu")
    params = SamplingParams(max_tokens=3)
    before = await model.chat(user("hi"), params=params)
    # The trainer's model sits in training mode with gradient checkpointing between steps.
    model.model.activation_checkpointing_enable()
    model.model.train()
    during = await model.chat(user("hi"), params=params)
    assert during.completion_token_ids == before.completion_token_ids
    assert model.model.training  # restored after the decode
    original = model.model.model.norm.weight.detach().clone()
    state = {k: v.detach().clone() for k, v in model.model.state_dict().items() if k != "lm_head.weight"}
    state["model.norm.weight"] = original * 2
    save_file(state, str(tmp_path / "model.safetensors"))
    model.load_weights(tmp_path)
    assert torch.equal(model.model.model.norm.weight, original * 2)
    # A backend around an already loaded model (what the trainer holds) works the same way.
    again = LocalChatModel(model.model, model.tokenizer, name="trained")
    assert again.model is model.model
    with pytest.raises(ModelError, match="do not fit"):
        again.load_state_dict({"model.norm.weight": original, "no.such.weight": original})
    with pytest.raises(ModelError, match="not a model folder"):
        LocalChatModel.load(tmp_path / "missing")


async def test_bfloat16_weights_score_as_the_float32_ones_do(embedded_model_path: Path, local_model) -> None:
    """bf16 is rounding, not another model: scored on the same tokens (the prompt and the fp32
    answer), both give each token nearly the same log-probability and the same top choice almost
    everywhere. Not the greedy text: the first token of this answer is a near tie ("The" -1.62,
    "La" -1.72 on one CPU), which bf16's rounding may break either way, machine by machine."""
    import torch

    from simulate.local import LocalChatModel

    half = LocalChatModel.load(embedded_model_path, device="cpu", dtype="bfloat16")
    assert next(half.model.parameters()).dtype == torch.bfloat16
    assert next(local_model.model.parameters()).dtype == torch.float32  # the CPU default
    answer = await local_model.chat(user(PROMPTS[0]), params=SamplingParams(max_tokens=8))
    assert "Paris" in answer.text
    conversation = [{"role": "user", "content": PROMPTS[0]}, {"role": "assistant", "content": answer.text}]
    ids = local_model.tokenizer.apply_chat_template(conversation, return_tensors="pt", return_dict=True)[
        "input_ids"
    ]
    with torch.no_grad():
        full_lp = local_model.model(ids).logits[0].float().log_softmax(-1)
        half_lp = half.model(ids).logits[0].float().log_softmax(-1)
    taken = ids[0, 1:, None]
    gap = (full_lp[:-1].gather(1, taken) - half_lp[:-1].gather(1, taken)).abs()
    same_top = (full_lp.argmax(-1) == half_lp.argmax(-1)).float().mean().item()
    assert gap.mean().item() < 0.15 and same_top >= 0.9, (gap.mean().item(), same_top)


TOOLS = [
    ToolSpec(
        name="get_weather",
        description="Get the current weather for a city.",
        parameters={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name="book_table",
        description="Book a restaurant table.",
        parameters={
            "type": "object",
            "properties": {
                "restaurant_id": {"type": "string"},
                "people": {"type": "integer", "minimum": 1},
                "dishes": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["restaurant_id", "people"],
            "additionalProperties": False,
        },
    ),
]


def test_tool_call_grammar_admits_exactly_schema_valid_calls(local_model) -> None:
    """Token by token, the grammar takes free text and valid calls, and refuses broken ones."""
    from simulate.constrained import GrammarCache

    compiled = local_model._grammars.compile_tool_calls(TOOLS)

    def accepted(text: str) -> bool:
        matcher = GrammarCache.matcher(compiled)
        ids = local_model.tokenizer(text, add_special_tokens=False)["input_ids"]
        return all(matcher.accept_token(i) for i in ids)

    good = [
        "The weather is fine.",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        'Booking.\n<tool_call>\n{"name": "book_table", "arguments": {"restaurant_id": "R-1", "people": 2, '
        '"dishes": ["soup", "pie"]}}\n</tool_call>\nDone.',
    ]
    bad = [
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',  # unknown tool
        '<tool_call>\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n</tool_call>',  # unknown arg
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}\n</tool_call>',
        '<tool_call>\n{"name": "book_table", "arguments": {"restaurant_id": "R-1", "people": 0}}\n</tool_call>',
        '<tool_call>\n{"name": "book_table", "arguments": {"restaurant_id": "R-1", "people": 2, "dishes": ["a"}}',
        '<tool_call>\n{"name": "book_table", "arguments": {"people": 2}}\n</tool_call>',  # missing required
        '<tool_call>\n{"name": "book_table", "arguments": {"restaurant_id": "R-1"}}\n</tool_call>',
        '<tool_call>\n{"name": "book_table", "arguments": {"restaurant_id": "R-1", "restaurant_id": "R-2", '
        '"people": 2}}\n</tool_call>',  # a repeated key
    ]
    assert all(accepted(t) for t in good)
    assert not any(accepted(t) for t in bad)


def test_tool_grammars_tolerate_odd_schemas_and_stay_bounded(local_model) -> None:
    from simulate.constrained import GrammarCache

    odd = ToolSpec(name="odd", parameters={"type": "object", "properties": {"x": {"type": "frobnicate"}}})
    cache = GrammarCache(local_model.tokenizer, vocab_size=49152, stop_token_ids=[2], max_entries=2)
    compiled = cache.compile_tool_calls([odd, TOOLS[0]])  # no error: `odd` takes any JSON object
    matcher = GrammarCache.matcher(compiled)
    text = '<tool_call>\n{"name": "odd", "arguments": {"y": [1, 2]}}\n</tool_call>'
    assert all(matcher.accept_token(i) for i in local_model.tokenizer(text)["input_ids"])
    for tools in ([TOOLS[0]], [TOOLS[1]], TOOLS):
        cache.compile_tool_calls(tools)
    assert len(cache._compiled) == 2  # least recently used grammars are dropped


async def test_constrained_tool_calls_always_parse_and_validate(local_model) -> None:
    """The base model never writes a call on its own; required, every sampled call is valid."""
    from arena.episode.parser import parse_tool_calls

    questions = ["What's the weather in Oslo?", "Book a table for 4 at restaurant R-77, please."]
    results: list = [None] * 6

    async def one(i: int) -> None:
        params = SamplingParams(max_tokens=96, temperature=0.7 * (i % 3 > 0), seed=i, require_tool_call=True)
        results[i] = await local_model.chat(user(questions[i % 2]), tools=TOOLS, params=params)

    async with anyio.create_task_group() as tg:  # constrained greedy and sampled rows batch together
        for i in range(len(results)):
            tg.start_soon(one, i)
    schemas = {t.name: t.parameters for t in TOOLS}
    calls = 0
    for completion in results:
        parsed = parse_tool_calls(completion.text, known_tools=schemas)
        errors = [e.kind for e in parsed.errors]
        if completion.finish_reason == "length" and errors == ["unclosed_tag"]:
            errors = []  # the token budget ended the row inside a call: cut off, not malformed
        assert not errors, completion.text
        for call in parsed.calls:
            jsonschema.validate(call.arguments, schemas[call.name])
            calls += 1
    assert calls >= len(results) // 2, [c.text for c in results]
    with pytest.raises(ModelRequestError, match="cannot be combined"):
        await local_model.chat(
            user("x"),
            tools=TOOLS,
            params=SamplingParams(max_tokens=2, json_schema=SCHEMAS[0], constrain_tool_calls=True),
        )
    with pytest.raises(ModelRequestError, match="needs tools"):
        await local_model.chat(user("x"), params=SamplingParams(max_tokens=2, require_tool_call=True))
