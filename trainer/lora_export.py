"""A LoRA-trained policy as a full checkpoint, merged in fp32: `merged_model`.

peft's merge adds B·A·scale to each adapted weight in that weight's dtype. A LoRA round on GPU
keeps its frozen base in bfloat16 (`trainer.precision`), and at the production recipe's rate (lr
1e-6 over a round's few dozen steps) B·A·scale is mostly under half a bfloat16 step of the weight it
is added to: merged in bf16 the update rounds away (a simulation with peft's own merge kept 2.75% of
the weight changes, with cosine 0.23 to the intended update), and the published policy, the gate
and the next round see the parent. So the merge happens in fp32 on the round's fp32 weights: the
in-memory base when it is fp32 (CPU, where training weights always are), else the round's weights
read again from its policy folder (on CPU memory, as fp32) with the trained adapter put on them.
The checkpoint holds fp32 weights, and the next round's merge reads them back from it, so the
master weights stay fp32 from round to round although each round's frozen base computes in bf16.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

ADAPTER = "default"  # the trained adapter (a KL anchor, if any, is another one: "ref")


def _fp32_base(model: Any) -> bool:
    """Whether every weight of the peft model's base is fp32 (its adapters aside)."""
    import torch

    return all(p.dtype == torch.float32 for n, p in model.named_parameters() if "lora_" not in n)


def merged_model(model: Any, base_dir: Path) -> Any:
    """The full model `model` (a peft model) stands for, its adapter merged in fp32 (blocking).

    `base_dir` is the folder the round's base weights came from (its policy_dir); it is read only
    when the base in memory is not fp32. The training model keeps its adapter.
    """
    if _fp32_base(model):
        merged = copy.deepcopy(model)
        for name in [n for n in merged.peft_config if n != ADAPTER]:
            merged.delete_adapter(name)
        return merged.merge_and_unload()
    import torch
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    log.info("lora.merge_fp32", base=str(base_dir))
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    config = copy.deepcopy(model.peft_config[ADAPTER])
    config.inference_mode = True
    fresh = get_peft_model(base, config)
    weights = {
        k: v.detach().to("cpu", torch.float32)
        for k, v in get_peft_model_state_dict(model, adapter_name=ADAPTER).items()
    }
    result = set_peft_model_state_dict(fresh, weights)
    missing = [k for k in result.missing_keys if "lora_" in k]
    if missing:
        raise RuntimeError(f"the trained adapter did not fit the round's base weights: {missing[:3]}")
    return fresh.merge_and_unload()
