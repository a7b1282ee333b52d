"""KV-cache reuse across turns: the store's rules on small tensors, then equality on the real model."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import torch

from arena.types import Message, SamplingParams
from simulate.kv_reuse import MIN_REUSE, PrefixKVStore, RowKV, batch_cache, common_prefix, kv_chunks


def row(ids: list[int], heads: int = 2, dim: int = 4) -> RowKV:
    """A fake row cache whose keys hold the token ids (so truncation is visible)."""
    keys = torch.tensor(ids, dtype=torch.float32)[None, None, :, None].expand(1, heads, len(ids), dim)
    return RowKV(ids, [(keys.clone(), -keys.clone()) for _ in range(3)])


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0 and common_prefix([5], [6]) == 0


def test_store_serves_the_longest_shared_prefix_and_leaves_a_token_to_compute() -> None:
    store = PrefixKVStore()
    system = list(range(100, 100 + 2 * MIN_REUSE))
    store.put(row([*system, 1, 2, 3]))
    store.put(row([*system, 7]))
    hit = store.longest([*system, 1, 2, 9])
    assert hit is not None and hit.ids == [*system, 1, 2]
    assert hit.layers[0][0].shape[2] == len(hit.ids) and hit.layers[0][0][0, 0, -1, 0] == 2
    # An identical prompt still computes its last token (the logits of the next one come from it).
    same = store.longest([*system, 1, 2, 3])
    assert same is not None and len(same.ids) == len(system) + 2
    assert store.longest([*system[: MIN_REUSE - 1], 0]) is None  # too short to be worth it
    assert store.longest([999, *system]) is None


def test_store_drops_what_a_new_entry_extends_and_evicts_the_least_recent() -> None:
    base = list(range(MIN_REUSE))
    first = row([*base, 1])
    store = PrefixKVStore(max_bytes=3 * first.nbytes + first.nbytes // 2)
    store.put(first)
    store.put(row([*base, 1, 2]))  # the next turn of the same conversation
    assert len(store) == 1
    store.put(row([*base, 5]))
    store.put(row([*base, 6]))
    assert store.longest([*base, 1, 2, 3]) is not None  # touched: now the most recent
    store.put(row([*base, 7]))
    assert len(store) == 3 and store.nbytes <= store.max_bytes
    assert store.longest([*base, 5, 0]) is not None and len(store.longest([*base, 5, 0]).ids) == MIN_REUSE
    store.clear()
    assert len(store) == 0 and store.nbytes == 0
    store.put(row([1, 2]))  # below MIN_REUSE: not kept
    assert len(store) == 0


@pytest.mark.model
@pytest.mark.anyio
async def test_multi_turn_conversations_decode_the_same_with_and_without_reuse(
    embedded_model_path: Path,
) -> None:
    from simulate.local import LocalChatModel
    from trainer.checkpoints import load_policy

    model, tokenizer = load_policy(embedded_model_path)
    model.eval()
    params = SamplingParams(temperature=0.0, max_tokens=12, logprobs=True)

    async def three_turns(chat: LocalChatModel) -> list[list]:
        convs = [
            [
                Message(role="system", content="You are a terse assistant for a library."),
                Message(role="user", content=f"Name a book about topic number {i}."),
            ]
            for i in range(3)
        ]
        turns = []
        for _ in range(3):
            out: list = [None] * len(convs)

            async def one(i: int, out: list) -> None:
                out[i] = await chat.chat(convs[i], params=params)

            async with anyio.create_task_group() as tg:
                for i in range(len(convs)):
                    tg.start_soon(one, i, out)
            turns.append(out)
            for i, c in enumerate(out):
                convs[i] = [
                    *convs[i],
                    Message(role="assistant", content=c.text),
                    Message(role="user", content="Another?"),
                ]
        return turns

    plain = await three_turns(LocalChatModel(model, tokenizer, kv_reuse_bytes=0))
    reusing = LocalChatModel(model, tokenizer)
    reused = await three_turns(reusing)
    # A KV budget below two rows: queued rows decode one batch at a time, to the same tokens.
    one_row = LocalChatModel(model, tokenizer, max_batch_kv_bytes=1)
    assert one_row._batch_tokens == 1
    for a_turn, b_turn in zip(reused, await three_turns(one_row), strict=True):
        for a, b in zip(a_turn, b_turn, strict=True):
            assert b.completion_token_ids == a.completion_token_ids
    store = reusing._kv_store
    assert store is not None and store.hits > 0
    # Later turns computed only what was new: most of their prompts came from the store.
    later_prompt_tokens = sum(len(c.prompt_token_ids) for turn in reused[1:] for c in turn)
    assert store.reused_tokens > later_prompt_tokens / 2
    for a_turn, b_turn in zip(plain, reused, strict=True):
        for a, b in zip(a_turn, b_turn, strict=True):
            assert b.prompt_token_ids == a.prompt_token_ids
            assert b.completion_token_ids == a.completion_token_ids
            assert b.completion_logprobs == pytest.approx(a.completion_logprobs, abs=2e-3)
    # New weights make the cached keys stale.
    reusing.load_state_dict(model.state_dict())
    assert len(store) == 0


def test_kv_chunks_keep_each_batch_within_the_budget() -> None:
    widths = [100, 400, 100, 250, 400, 900, 100]
    chunks = kv_chunks(widths, 1000)
    assert sorted(i for c in chunks for i in c) == list(range(len(widths)))
    assert chunks[0] == [5]  # the widest row first; alone it nearly fills the budget
    for chunk in chunks:
        width = max(widths[i] for i in chunk)
        assert len(chunk) * width <= 1000
        assert widths[chunk[0]] == width
    assert [1, 4] in chunks  # rows of one width (a GRPO group's prompt) share a batch
    # A row wider than the budget still decodes, alone.
    assert kv_chunks([5000, 10], 1000) == [[0], [1]]
    assert kv_chunks([], 1000) == []


def test_batch_cache_pads_rows_and_releases_them() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=32,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    )
    from simulate.kv_reuse import kv_bytes_per_token

    assert kv_bytes_per_token(model) == 2 * 2 * 1 * 8 * 4  # k+v, layers, kv heads, head dim, fp32

    def row(n: int, fill: float) -> RowKV:
        return RowKV(list(range(n)), [(torch.full((1, 1, n, 8), fill), torch.full((1, 1, n, 8), -fill))] * 2)

    rows = [row(3, 1.0), row(5, 2.0)]
    cache, attention, last = batch_cache(model, rows)
    assert attention.tolist() == [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]
    assert last.tolist() == [[2], [4]]
    keys = cache.layers[1].keys
    assert keys.shape == (2, 1, 5, 8)
    assert keys[0, 0, :2].abs().sum() == 0 and bool((keys[0, 0, 2:] == 1.0).all())
    assert bool((cache.layers[0].values[1] == -2.0).all())
    # The rows' own tensors were let go as they were copied.
    assert all(k.numel() == 0 and v.numel() == 0 for r in rows for k, v in r.layers)
