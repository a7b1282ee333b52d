"""Multi-turn prompts reuse the ids the model sampled, even where re-tokenizing would merge them."""

from __future__ import annotations

import pytest

from arena.types import Message, SamplingParams
from simulate.token_prefix import TokenPrefixCache


def test_cache_reuses_the_longest_prefix_that_ends_on_a_special_token() -> None:
    words = {"<a>": [1], "hello": [2], "hel": [3], "lo": [4], " world": [5]}

    def tokenize(text: str) -> list[int]:  # a toy greedy tokenizer: longest known piece first
        out, i = [], 0
        while i < len(text):
            piece = max((w for w in words if text.startswith(w, i)), key=len)
            out += words[piece]
            i += len(piece)
        return out

    cache = TokenPrefixCache(["<a>"])
    cache.remember("hello<a>", [3, 4, 1])  # sampled as "hel" + "lo", not as "hello"
    assert cache.encode("hello<a> world", tokenize) == [3, 4, 1, 5]
    assert cache.encode("hello world", tokenize) == [2, 5]  # no special-token cut: whole text
    cache.remember("hel", [3])
    assert cache.encode("hello<a>", tokenize) == [3, 4, 1]  # "hel" would cut inside a word


@pytest.mark.model
@pytest.mark.anyio
async def test_next_turn_extends_a_non_canonical_completion(local_model) -> None:
    """A completion whose ids re-tokenize differently still chains into the next prompt."""
    tok = local_model.tokenizer
    messages = [Message(role="user", content="Say hello.")]
    first = await local_model.chat(messages, params=SamplingParams(max_tokens=4))
    text = first.text
    # Replace what was sampled by a deliberately split spelling of one word and remember it,
    # as if the model had sampled it that way.
    split = tok.encode("Hel", add_special_tokens=False) + tok.encode("lo", add_special_tokens=False)
    assert split != tok.encode("Hello", add_special_tokens=False)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    local_model._remember(local_model._encode(messages, None)[0], first.prompt_token_ids, [*split, end])
    follow = [*messages, Message(role="assistant", content="Hello"), Message(role="user", content="Again.")]
    ids = local_model.render_prompt(follow)
    seq = first.prompt_token_ids + split + [end]
    assert ids[: len(seq)] == seq, text
    assert tok.decode(ids) == tok.decode(local_model._tokenize(tok.decode(ids)))
