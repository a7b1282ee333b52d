"""KV-cache reuse for the local backend: prefill each prompt once, from the longest known prefix.

A multi-turn episode sends its whole conversation every turn, and the conversation only grows:
turn k's prompt is turn k-1's prompt, its completion and the tool results (the token-prefix cache
keeps those ids identical). Re-running the model over the whole conversation every turn made the
prefill, not the decoding, the larger part of a rollout turn on CPU (8 rows × 1,500 tokens: 13 s;
128 decode steps: about as much). So:

- When a row finishes, its keys and values (prompt and completion) go into a `PrefixKVStore`.
- A new prompt starts from the longest prefix it shares with a stored entry (its own previous
  turn, or another conversation under the same system prompt) or with a row prefilled earlier in
  the same batch (a GRPO group's samples), and runs the model over the rest only. Rows are
  prefilled one by one (no padding to compute), then left-padded into one batch cache for decoding.

Keys are cached after the rotary embedding, at the positions they were computed at; a row's own
tokens continue from there, so a reused prefix computes what a full prefill would (up to float
rounding). New weights make every entry stale: `clear()` on every weight swap.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog
import torch

log = structlog.get_logger(__name__)

# Below this many reusable tokens a separate start costs more than it saves.
MIN_REUSE = 8
DEFAULT_STORE_BYTES = 2 << 30
# The padded KV cache of one decode batch (rows x widest row): 32 rows of 3,600 tokens of the
# embedded model in float32 are 5 GiB, and building the batch used to hold it twice.
DEFAULT_BATCH_KV_BYTES = 3 << 30

LayerKV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values), [1, heads, tokens, dim]


@dataclass
class RowKV:
    """One sequence's cache: its token ids and each layer's keys and values for exactly those ids."""

    ids: list[int]
    layers: LayerKV

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.layers)

    def truncated(self, n: int) -> RowKV:
        """The cache of the first `n` tokens (views, no copy)."""
        return RowKV(self.ids[:n], [(k[:, :, :n], v[:, :, :n]) for k, v in self.layers])


class PrefixKVStore:
    """Finished rows' caches, least recently used evicted first once over `max_bytes`."""

    def __init__(self, max_bytes: int = DEFAULT_STORE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, RowKV] = OrderedDict()
        self._bytes = 0
        # Prefills that started from a reused cache, and the tokens they skipped, whether the cache
        # came from this store or from an earlier row of the same batch.
        self.hits = 0
        self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return self._bytes

    def longest(self, prompt: Sequence[int]) -> RowKV | None:
        """The cache of the longest prefix `prompt` shares with an entry, leaving it one token of its
        own (None below `MIN_REUSE` tokens). Sharing counts, not only extending: prompts under one
        system prompt and tool list reuse it across batches."""
        best_key, best_len = None, 0
        for key, entry in self._entries.items():
            n = reusable(entry.ids, prompt)
            if n > best_len:
                best_key, best_len = key, n
        if best_key is None:
            return None
        self._entries.move_to_end(best_key)
        return self._entries[best_key].truncated(best_len)

    def put(self, row: RowKV) -> None:
        """Keep `row`; entries it extends go (whatever prefix they share, it shares too)."""
        size = row.nbytes
        if size > self.max_bytes or len(row.ids) < MIN_REUSE:
            return
        n = len(row.ids)
        for key in [
            k for k, e in self._entries.items() if len(e.ids) <= n and row.ids[: len(e.ids)] == e.ids
        ]:
            self._bytes -= self._entries.pop(key).nbytes
        key = id(row)
        self._entries[key] = row
        self._bytes += size
        while self._bytes > self.max_bytes and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes

    def clear(self) -> None:
        """Forget everything (the weights changed)."""
        self._entries.clear()
        self._bytes = 0


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share (vectorized: entries are thousands of tokens)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


def reusable(ids: Sequence[int], prompt: Sequence[int]) -> int:
    """Tokens of `ids`'s cache that `prompt` can start from: their shared prefix, leaving the prompt
    one token of its own (its next-token logits come from it); 0 below `MIN_REUSE`."""
    n = min(common_prefix(ids, prompt), len(prompt) - 1)
    return n if n >= MIN_REUSE else 0


def _start_for(prompt: Sequence[int], earlier: Sequence[RowKV], store: PrefixKVStore | None) -> RowKV | None:
    """The longest reusable cache for `prompt`: a stored entry or an earlier row of this batch."""
    best = store.longest(prompt) if store is not None else None
    for row in earlier:
        n = reusable(row.ids, prompt)
        if n and (best is None or n > len(best.ids)):
            best = row.truncated(n)
    return best


def prefill_rows(
    model: Any, prompts: Sequence[Sequence[int]], store: PrefixKVStore | None
) -> tuple[list[RowKV], torch.Tensor]:
    """Each prompt's cache and the logits of its next token ([rows, vocab], float32)."""
    from transformers import DynamicCache

    device = model.device
    rows: list[RowKV] = []
    logits: list[torch.Tensor] = []
    for prompt in prompts:
        start = _start_for(prompt, rows, store)
        cache = DynamicCache(config=model.config)
        done = 0
        if start is not None:
            for layer, (k, v) in enumerate(start.layers):
                cache.update(k, v, layer)
            done = len(start.ids)
            if store is not None:
                store.hits += 1
                store.reused_tokens += done
        own = torch.tensor([list(prompt[done:])], dtype=torch.long, device=device)
        positions = torch.arange(done, len(prompt), device=device)[None, :]
        out = model(
            input_ids=own, position_ids=positions, past_key_values=cache, use_cache=True, logits_to_keep=1
        )
        if cache.get_seq_length() != len(prompt):
            raise RuntimeError("the model did not fill its KV cache (use_cache disabled?); cannot decode")
        rows.append(RowKV(list(prompt), [(layer.keys, layer.values) for layer in cache.layers]))
        logits.append(out.logits[0, -1, :].float())
    return rows, torch.stack(logits)


def kv_bytes_per_token(model: Any) -> int:
    """Bytes of keys and values one token takes in `model`'s cache (all layers)."""
    config = model.config
    config = getattr(config, "get_text_config", lambda: config)()
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    element = next(model.parameters()).element_size()
    return 2 * int(config.num_hidden_layers) * kv_heads * head_dim * element


def kv_chunks(widths: Sequence[int], budget_tokens: int) -> list[list[int]]:
    """Split rows into decode batches whose padded cache (rows x widest) fits `budget_tokens`.

    `widths` are each row's prompt plus new-token budget. Rows are taken widest first, so rows
    of like length share a batch (less padding) and a GRPO group's samples, which share a prompt,
    stay together. A row wider than the budget still gets a batch of its own.
    """
    order = sorted(range(len(widths)), key=lambda i: -widths[i])
    chunks: list[list[int]] = []
    for i in order:
        # Widest first: the chunk's first row sets its width.
        if chunks and (len(chunks[-1]) + 1) * widths[chunks[-1][0]] <= budget_tokens:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return chunks


def batch_cache(model: Any, rows: Sequence[RowKV], room: int = 0) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """(cache, attention mask, last positions) of `rows` left-padded into one batch.

    Consumes `rows`: each row's layer is released as soon as it is copied, so building the batch
    holds one batch of keys and values at its peak, not the rows and the batch side by side. The
    cache's layers keep `room` spare positions for the tokens the batch will decode
    (`simulate.kv_layer`: no per-token copy of the cache).
    """
    from simulate.kv_layer import growing_cache  # imports transformers: only once a batch decodes

    width = max(len(r.ids) for r in rows)
    attention = torch.zeros((len(rows), width), dtype=torch.long, device=model.device)
    for b, row in enumerate(rows):
        attention[b, width - len(row.ids) :] = 1
    cache = growing_cache(model.config)
    for layer in range(len(rows[0].layers)):
        k0, v0 = rows[0].layers[layer]
        keys = k0.new_zeros((len(rows), k0.shape[1], width + room, k0.shape[3]))
        values = v0.new_zeros((len(rows), v0.shape[1], width + room, v0.shape[3]))
        for b, row in enumerate(rows):
            k, v = row.layers[layer]
            keys[b, :, width - k.shape[2] : width] = k[0]
            values[b, :, width - v.shape[2] : width] = v[0]
            row.layers[layer] = (k[:, :, :0].clone(), v[:, :, :0].clone())  # released
        cache.layers[layer].adopt(keys, values, width)
    last = torch.tensor([[len(r.ids) - 1] for r in rows], dtype=torch.long, device=model.device)
    return cache, attention, last


def row_from_batch(cache: Any, attention: torch.Tensor, b: int, ids: list[int]) -> RowKV:
    """Row `b`'s cache (its unpadded positions) out of a batch cache, as a copy."""
    keep = attention[b].bool()
    layers = [
        (layer.keys[b : b + 1, :, keep].clone(), layer.values[b : b + 1, :, keep].clone())
        for layer in cache.layers
    ]
    if layers and layers[0][0].shape[2] != len(ids):
        raise RuntimeError(f"row cache has {layers[0][0].shape[2]} positions for {len(ids)} tokens")
    return RowKV(ids, layers)
