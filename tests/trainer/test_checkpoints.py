"""Checkpoints: retention, lineage, and a real round trip of the embedded model."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.checkpoints import (
    CheckpointError,
    Lineage,
    best_checkpoint,
    latest_checkpoint,
    lineage_chain,
    list_checkpoints,
    load_policy,
    prune_checkpoints,
    read_lineage,
    save_checkpoint,
)


class ScriptedModel:
    """Writes a weights file like save_pretrained would (control-flow tests only)."""

    def save_pretrained(self, folder: str, safe_serialization: bool = True) -> None:
        (Path(folder) / "model.safetensors").write_bytes(b"w")
        (Path(folder) / "config.json").write_text("{}")


class ScriptedTokenizer:
    def save_pretrained(self, folder: str) -> None:
        (Path(folder) / "tokenizer.json").write_text("{}")


def lineage(step: int, reward: float | None, parent: str | None = "base") -> Lineage:
    return Lineage(parent=parent, round_id=2, phase="grpo", step=step, total_steps=6, reward_mean=reward)


def test_keeps_the_last_n_and_the_best(tmp_path: Path) -> None:
    for step, reward in [(1, 0.2), (2, 0.9), (3, 0.1), (4, 0.3), (5, 0.4)]:
        save_checkpoint(ScriptedModel(), ScriptedTokenizer(), tmp_path, lineage(step, reward))
        prune_checkpoints(tmp_path, keep_last=2, keep_best=True)
    assert [lin.step for _, lin in list_checkpoints(tmp_path)] == [2, 4, 5]
    latest = latest_checkpoint(tmp_path)
    best = best_checkpoint(tmp_path)
    assert latest is not None and latest[1].step == 5
    assert best is not None and best[1].step == 2
    prune_checkpoints(tmp_path, keep_last=1, keep_best=False)
    assert [lin.step for _, lin in list_checkpoints(tmp_path)] == [5]


def test_half_written_folders_are_ignored(tmp_path: Path) -> None:
    save_checkpoint(ScriptedModel(), ScriptedTokenizer(), tmp_path, lineage(1, 0.5))
    (tmp_path / "checkpoints" / ".step-000002-tmp").mkdir()  # a crash during save
    (tmp_path / "checkpoints" / "step-000003").mkdir()  # no weights, no lineage
    assert [lin.step for _, lin in list_checkpoints(tmp_path)] == [1]
    with pytest.raises(CheckpointError, match=r"lineage\.json"):
        read_lineage(tmp_path / "checkpoints" / "step-000003")


def test_lineage_chain_follows_parents(tmp_path: Path) -> None:
    first = save_checkpoint(
        ScriptedModel(), ScriptedTokenizer(), tmp_path / "r1", lineage(3, 0.4, parent=None)
    )
    second = save_checkpoint(
        ScriptedModel(), ScriptedTokenizer(), tmp_path / "r2", lineage(6, 0.6, parent=str(first))
    )
    assert [lin.step for lin in lineage_chain(second)] == [6, 3]


@pytest.mark.model
def test_checkpoint_round_trips_the_logits(embedded_model_path: Path, tmp_path: Path) -> None:
    import torch

    model, tokenizer = load_policy(embedded_model_path)
    with torch.no_grad():  # perturb so the test does not pass by reloading the base weights
        model.model.layers[0].mlp.down_proj.weight.mul_(1.01)
    folder = save_checkpoint(model, tokenizer, tmp_path, lineage(1, 0.5))
    again, tokenizer2 = load_policy(folder)
    ids = torch.tensor([tokenizer("<|im_start|>user\nhello there<|im_end|>")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)
    assert tokenizer2.chat_template == tokenizer.chat_template
    assert read_lineage(folder).reward_mean == 0.5
