"""Token-in, token-out prompts: reuse the exact ids of earlier turns instead of re-tokenizing them.

A multi-turn episode re-renders the whole conversation each turn. Re-tokenizing text the model
sampled does not always give back the ids it sampled (BPE may merge "Hel" + "lo" into "Hello"),
so the new prompt would not extend the previous prompt + completion, the episode's token chain
would break, and the trainer would score tokens the policy never produced. `TokenPrefixCache`
remembers the ids of each finished sequence keyed by its text; a new prompt whose text starts
with a remembered text reuses those ids and tokenizes only the rest.

The rest is tokenized on its own, which is exact only when the cut falls on a special token
(`<|im_end|>`, `<|im_start|>`): the tokenizer never merges across those. Other cuts are refused
and the prompt is tokenized whole.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence


class TokenPrefixCache:
    """Finished sequences (text → ids), least recently used evicted first."""

    def __init__(self, special_tokens: Sequence[str], capacity: int = 512) -> None:
        self._special = tuple(t for t in special_tokens if t)
        self._capacity = capacity
        self._entries: OrderedDict[str, list[int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, text: str, ids: Sequence[int]) -> None:
        """Record that `text` is exactly the sequence `ids` (a prompt plus what was sampled after it)."""
        if not text:
            return
        self._entries[text] = list(ids)
        self._entries.move_to_end(text)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def encode(self, text: str, tokenize: Callable[[str], list[int]]) -> list[int]:
        """`text` as ids: the longest remembered prefix that ends on a special token, then the rest."""
        best = ""
        for key in self._entries:
            if len(key) > len(best) and text.startswith(key) and self._clean_cut(key, text):
                best = key
        if not best:
            return tokenize(text)
        self._entries.move_to_end(best)
        rest = text[len(best) :]
        return self._entries[best] + (tokenize(rest) if rest else [])

    def _clean_cut(self, key: str, text: str) -> bool:
        rest = text[len(key) :]
        return not rest or key.endswith(self._special) or rest.startswith(self._special)
