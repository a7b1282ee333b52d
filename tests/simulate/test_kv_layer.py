"""The growing KV layer holds exactly what transformers' concatenating layer holds, step by step."""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicLayer

from simulate.kv_layer import GrowingLayer


def _kv(generator: torch.Generator, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (batch, 3, length, 8)
    return torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)


def test_appends_growth_row_pruning_and_crops_match_the_concatenating_layer() -> None:
    generator = torch.Generator().manual_seed(0)
    growing, reference = GrowingLayer(), DynamicLayer()
    keys, values = _kv(generator, 4, 20)
    room = torch.zeros((4, 3, 22, 8)), torch.zeros((4, 3, 22, 8))  # 2 spare positions: growth comes soon
    room[0][:, :, :20], room[1][:, :, :20] = keys, values
    growing.adopt(*room, 20)
    reference.update(keys, values)
    for step in range(300):  # past several growths (each adds at least 256 positions)
        if step == 5:
            selected = torch.tensor([0, 2, 3])  # a row finished: the batch drops it
            growing.batch_select_indices(selected)
            reference.batch_select_indices(selected)
        new = _kv(generator, growing.keys.shape[0], 1)
        got = growing.update(*new)
        want = reference.update(*new)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert growing.get_seq_length() == reference.get_seq_length() == 21 + step
    growing.crop(-7)
    reference.crop(-7)
    assert (
        torch.equal(growing.keys, reference.keys) and growing.get_seq_length() == reference.get_seq_length()
    )
    # Room taken by the crop is written again by the next update, not appended after it.
    new = _kv(generator, 3, 2)
    assert torch.equal(growing.update(*new)[1], reference.update(*new)[1])


def test_adopting_buffers_that_do_not_fit_is_refused() -> None:
    keys = torch.zeros((1, 3, 10, 8))
    with pytest.raises(ValueError, match="cannot adopt"):
        GrowingLayer().adopt(keys, keys, 11)
    with pytest.raises(ValueError, match="cannot adopt"):
        GrowingLayer().adopt(keys, torch.zeros((1, 3, 9, 8)), 5)
