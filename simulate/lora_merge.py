"""A LoRA adapter folder (peft's `save_pretrained`) as weight deltas for a served model.

The trainer syncs a LoRA round's policy to the rollout server as its adapter alone (megabytes, not
the model's gigabytes). vLLM applies it at runtime (`/v1/load_lora_adapter`); the CPU server
(`arena serve-model --allow-reload`) merges it into the weights it holds: for each adapted linear
layer W, W + (alpha / r) * B @ A, exactly what peft's `merge_and_unload` computes.

Only plain LoRA is read: DoRA, trained biases and `modules_to_save` change more than the adapted
matrices, and such an adapter is refused rather than served wrong.

Why not peft's own merge: it would wrap the served model in a `PeftModel` (replacing its linear
modules while the server holds it) and writes the merged weights through `.data`, which leaves the
parameters' version counters as they were, so the lean decode step's copies
(`simulate.fast_decode`, refreshed when a counter moves) would keep serving the old weights. Here
the deltas are added in place through the parameters themselves, and the layers' earlier values
are kept so that the next adapter replaces this one rather than stacking on it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from arena.protocols import ModelError

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
_PREFIX = "base_model.model."


def _config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / ADAPTER_CONFIG).read_text())
    except FileNotFoundError:
        raise ModelError(f"no {ADAPTER_CONFIG} in {folder}: not a LoRA adapter folder") from None
    except ValueError as exc:
        raise ModelError(f"{folder / ADAPTER_CONFIG} is not JSON: {exc}") from None
    unsupported = [
        key
        for key, plain in (("use_dora", False), ("fan_in_fan_out", False), ("modules_to_save", None))
        if config.get(key, plain) not in (plain, [])
    ]
    if config.get("bias", "none") != "none":
        unsupported.append("bias")
    if unsupported:
        raise ModelError(f"adapter {folder} uses {', '.join(unsupported)}: only plain LoRA is served")
    if not isinstance(config.get("r"), int) or config["r"] < 1:
        raise ModelError(f"adapter {folder} has no valid rank r")
    return config


def adapter_deltas(folder: str | Path, base: dict[str, Any]) -> dict[str, Any]:
    """The weight delta of each adapted layer: base parameter name -> (alpha / r) * B @ A.

    `base` is the served model's state dict (names and shapes are checked against it; the deltas
    come in its dtype and device). Raises `ModelError` for anything that does not fit.
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    config = _config(folder)
    if not (folder / ADAPTER_WEIGHTS).is_file():
        raise ModelError(f"no {ADAPTER_WEIGHTS} in {folder}")
    r, alpha = config["r"], config.get("lora_alpha", config["r"])
    scale = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    tensors = load_file(str(folder / ADAPTER_WEIGHTS))
    pairs: dict[str, dict[str, Any]] = {}
    for key, tensor in tensors.items():
        if not key.startswith(_PREFIX) or not key.endswith((".lora_A.weight", ".lora_B.weight")):
            raise ModelError(f"adapter {folder}: unexpected tensor {key!r}")
        module, kind = key[len(_PREFIX) :].rsplit(".lora_", 1)
        pairs.setdefault(module, {})[kind[0]] = tensor
    deltas: dict[str, Any] = {}
    for module, ab in sorted(pairs.items()):
        name = f"{module}.weight"
        if name not in base or set(ab) != {"A", "B"}:
            raise ModelError(f"adapter {folder}: {module} does not match a layer of the served model")
        weight = base[name]
        delta = (ab["B"].float() @ ab["A"].float()) * scale
        if tuple(delta.shape) != tuple(weight.shape):
            raise ModelError(
                f"adapter {folder}: {module} gives {tuple(delta.shape)}, the layer is {tuple(weight.shape)}"
            )
        deltas[name] = delta.to(dtype=weight.dtype, device=weight.device)
    if not deltas:
        raise ModelError(f"adapter {folder} adapts no layer")
    return deltas
