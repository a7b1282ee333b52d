"""A KV cache layer that grows in place: decoding appends into spare capacity instead of copying.

transformers' `DynamicLayer` concatenates every new token onto its keys and values, so each decode
step copies the whole cache of every layer: with ~2,300-token tool prompts that copy was a third of
a decode step on 2 cores (355 ms for three rows, `torch.cat` 33%). This layer keeps its keys and
values in buffers with room to spare, writes each step's token into the room, and exposes views of
the filled part. The decode loop builds a batch with room for its longest request, up to 256
positions (`adopt`), so most batches are copied once, when they are built; a layer that runs out
grows by an eighth (at least 256 positions). Attention sees the same values as before, so outputs are unchanged (measured on SmolLM2-135M, three
rows of ~2,300 tokens, 2 cores: 354 → 316 ms a step).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

# Room added when a buffer is full: an eighth of what it holds, at least this many positions
# (a doubling would hold twice a long batch's keys and values for a few more tokens).
_MIN_GROWTH = 256


class GrowingLayer(DynamicLayer):
    """A `DynamicLayer` whose `update` writes into spare capacity (keys/values are views)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._key_buf: torch.Tensor | None = None
        self._value_buf: torch.Tensor | None = None
        self._length = 0

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append `key_states`/`value_states` along the sequence; return the filled views."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        end = self._length + new
        if self._key_buf is None or end > self._key_buf.shape[-2]:
            self._grow(key_states, value_states, end)
        assert self._key_buf is not None and self._value_buf is not None
        self._key_buf[:, :, self._length : end] = key_states
        self._value_buf[:, :, self._length : end] = value_states
        self._length = end
        self._expose()
        return self.keys, self.values

    def adopt(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """Take `keys`/`values` (batch, heads, capacity, dim) as the buffers, `length` positions filled."""
        if keys.shape != values.shape or not 0 <= length <= keys.shape[-2]:
            raise ValueError(
                f"cannot adopt buffers {tuple(keys.shape)}/{tuple(values.shape)} with {length} filled"
            )
        self.lazy_initialization(keys, values)
        self._key_buf, self._value_buf, self._length = keys, values, length
        self._expose()

    def _grow(self, key_states: torch.Tensor, value_states: torch.Tensor, needed: int) -> None:
        capacity = needed + max(_MIN_GROWTH, needed // 8)
        keys = key_states.new_empty((*key_states.shape[:2], capacity, key_states.shape[-1]))
        values = value_states.new_empty((*value_states.shape[:2], capacity, value_states.shape[-1]))
        if self._key_buf is not None and self._length:
            keys[:, :, : self._length] = self._key_buf[:, :, : self._length]
            values[:, :, : self._length] = self._value_buf[:, :, : self._length]  # type: ignore[index]
        self._key_buf, self._value_buf = keys, values

    def _expose(self) -> None:
        assert self._key_buf is not None and self._value_buf is not None
        self.keys = self._key_buf[:, :, : self._length]
        self.values = self._value_buf[:, :, : self._length]

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last `-tokens_to_remove` positions (transformers' convention: a negative count)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative count of positions to remove, got {tokens_to_remove}")
        if tokens_to_remove and self.is_initialized:
            self._length = max(0, self._length + tokens_to_remove)
            self._expose()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the rows `indices` (their spare capacity stays)."""
        if self._key_buf is not None:
            self._key_buf = self._key_buf[indices]
            self._value_buf = self._value_buf[indices]  # type: ignore[index]
            self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat each row `repeats` times."""
        if self._key_buf is not None:
            self._key_buf = self._key_buf.repeat_interleave(repeats, dim=0)
            self._value_buf = self._value_buf.repeat_interleave(repeats, dim=0)  # type: ignore[union-attr]
            self._expose()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Reorder rows (beam search)."""
        self.batch_select_indices(beam_idx)

    def reset(self) -> None:
        """Drop everything (the buffers too)."""
        self._key_buf = self._value_buf = None
        self._length = 0
        super().reset()


def growing_cache(config: Any) -> DynamicCache:
    """A `DynamicCache` for `config` whose full-attention layers grow in place."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
