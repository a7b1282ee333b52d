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


@pytest.mark.parametrize("base_dtype", ["bfloat16", "float32"])
def test_a_lora_update_at_lr_1e_6_survives_the_merge_into_the_checkpoint(
    tmp_path: Path, base_dtype: str
) -> None:
    """32 AdamW steps at lr 1e-6 on the adapters of a bf16 base (a LoRA round on GPU) or an fp32 one
    (on CPU): the checkpoint's weights differ from the round's base by B·A·scale (merged in fp32)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from trainer.grpo_model import savable

    from .tiny import tiny_causal_lm, tiny_tokenizer

    base_dir = tmp_path / "base"
    tiny_causal_lm(seed=3).save_pretrained(str(base_dir))  # fp32 master weights on disk
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=getattr(torch, base_dtype))
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    optimizer = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=1e-6)
    ids = torch.randint(0, 512, (2, 16), generator=torch.Generator().manual_seed(0))
    for _ in range(32):
        peft(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    lineage = Lineage(parent=str(base_dir), round_id=1, phase="grpo", step=1, total_steps=1)
    path = save_checkpoint(savable(peft, base_dir), tiny_tokenizer(), tmp_path / "out", lineage, adapter=peft)
    before, after = load_file(str(base_dir / "model.safetensors")), load_file(str(path / "model.safetensors"))
    intended, merged, in_bf16 = [], [], []
    for name, module in peft.named_modules():
        if hasattr(module, "lora_A") and "default" in module.lora_A:
            key = name.removeprefix("base_model.model.") + ".weight"
            delta = module.lora_B["default"].weight.float() @ module.lora_A["default"].weight.float()
            delta = delta * module.scaling["default"]
            intended.append(delta.flatten())
            merged.append((after[key].float() - before[key].float()).flatten())
            weight = before[key].to(torch.bfloat16)
            in_bf16.append(((weight + delta.to(torch.bfloat16)).float() - weight.float()).flatten())
    want, got, rounded = torch.cat(intended), torch.cat(merged), torch.cat(in_bf16)

    def relative_error(x: torch.Tensor) -> float:
        return float((x - want).norm() / want.norm())

    assert relative_error(rounded) > 0.5  # the regime: merged in bf16, most of the update is lost
    assert relative_error(got) < 0.01
    untouched = [k for k in before if not any(f".{m}." in k for m in ("q_proj", "v_proj"))]
    assert all(torch.equal(before[k], after[k]) for k in untouched)
