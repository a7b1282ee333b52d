"""The sampling defaults a served model's `generation_config.json` sets, applied as vLLM applies them.

vLLM (`--generation-config auto`, its default) fills every sampling field a request leaves out
from the model's generation config: `temperature`, `top_p`, `top_k`, `min_p`,
`repetition_penalty`, and `max_new_tokens` as `max_tokens` (Qwen3-8B ships top_k 20). `arena
serve-model` does the same, so a client that tests against it meets what it meets on vLLM: a
request that does not pin a field samples with the model's setting, not the neutral one.
"""

from __future__ import annotations

from typing import Any

# The fields vLLM reads from a model's generation config (its `get_diff_sampling_param`).
GENERATION_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
# Neutral values: what sampling uses when neither the request nor the model sets a field.
NEUTRAL: dict[str, float | int] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
}


def generation_defaults(model: Any) -> dict[str, Any]:
    """The sampling fields the served model's generation config sets away from transformers' defaults.

    `model` is the served `ChatModel`; one without a transformers model (`.model`) sets none.
    """
    config = getattr(getattr(model, "model", None), "generation_config", None)
    if config is None:
        return {}
    diff = config.to_diff_dict()
    out = {k: diff[k] for k in GENERATION_FIELDS if diff.get(k) is not None}
    if diff.get("max_new_tokens") is not None:
        out["max_tokens"] = int(diff["max_new_tokens"])
    return out


def sampling_fields(req: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """The request's sampling fields, each left out filled from `defaults`, then from `NEUTRAL`.

    vLLM takes top_k -1 (and 0) as "every token"; here that is 0.
    """
    out: dict[str, Any] = {}
    for name in GENERATION_FIELDS:
        value = getattr(req, name)
        out[name] = value if value is not None else defaults.get(name, NEUTRAL[name])
    out["top_k"] = max(0, int(out["top_k"]))
    return out
