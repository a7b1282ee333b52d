"""LoRA adapters on `arena serve-model --allow-reload`: vLLM's runtime adapter endpoints on CPU.

The trainer syncs a LoRA round's updates as the adapter alone; this server merges it into the
weights it holds, exactly as peft's `merge_and_unload` would, and serves it under the adapter's
name. The embedded model is real; the adapters are peft's own, with random weights.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from arena.protocols import ModelError
from simulate.serve import create_app

pytestmark = [pytest.mark.model, pytest.mark.anyio]


def write_adapter(base_dir: Path, out: Path, seed: int, **config: Any) -> dict[str, Any]:
    """A peft LoRA adapter of the model in `base_dir` with random (non-zero) weights, and the state
    dict peft's own merge gives."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    settings = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "init_lora_weights": False}
    peft_model = get_peft_model(model, LoraConfig(**(settings | config)))
    peft_model.save_pretrained(str(out))
    return {k: v.clone() for k, v in peft_model.merge_and_unload().state_dict().items()}


@pytest.fixture(scope="module")
def served(embedded_model_path: Path) -> Any:
    from simulate.local import LocalChatModel

    return LocalChatModel.load(embedded_model_path, device="cpu", dtype="float32")


def weights(model: Any) -> dict[str, Any]:
    return {k: v.clone() for k, v in model._model.state_dict().items()}


def same(a: dict[str, Any], b: dict[str, Any], atol: float = 1e-6) -> bool:
    import torch

    return all(torch.allclose(a[k], b[k], atol=atol) for k in a)


async def test_an_adapter_is_served_merged_under_its_name_and_replaced_by_the_next(
    served: Any, embedded_model_path: Path, tmp_path: Path
) -> None:
    base = weights(served)
    first = write_adapter(embedded_model_path, tmp_path / "a1", seed=1)
    second = write_adapter(embedded_model_path, tmp_path / "a2", seed=2)
    app = create_app(served, name="policy", allow_reload=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:

        async def complete(model: str) -> httpx.Response:
            body = {"model": model, "prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0}
            return await http.post("/v1/completions", json=body)

        loaded = await http.post(
            "/v1/load_lora_adapter", json={"lora_name": "s1", "lora_path": str(tmp_path / "a1")}
        )
        assert loaded.status_code == 200 and "s1" in loaded.text
        assert same(weights(served), first)  # what peft's own merge gives
        assert (await complete("s1")).status_code == 200
        listed = (await http.get("/v1/models")).json()["data"]
        assert [(m["id"], m.get("parent")) for m in listed] == [("policy", None), ("s1", "policy")]
        # The next step's adapter replaces it, relative to the same full weights (not stacked).
        loaded = await http.post(
            "/v1/load_lora_adapter", json={"lora_name": "s2", "lora_path": str(tmp_path / "a2")}
        )
        assert loaded.status_code == 200 and same(weights(served), second)
        assert (await complete("s1")).status_code == 404 and (await complete("s2")).status_code == 200
        unloaded = await http.post("/v1/unload_lora_adapter", json={"lora_name": "s2"})
        assert unloaded.status_code == 200 and same(weights(served), base, atol=0)
        assert (await complete("s2")).status_code == 404 and (await complete("policy")).status_code == 200

        # Bad requests: a clear 400/404, and the served weights do not move.
        (tmp_path / "empty").mkdir()
        bad = [
            ({"lora_name": "x", "lora_path": str(tmp_path / "missing")}, 400, "is not a folder"),
            ({"lora_name": "x", "lora_path": str(tmp_path / "empty")}, 400, "not a LoRA adapter folder"),
            ({"lora_name": "policy", "lora_path": str(tmp_path / "a1")}, 400, "served model's own name"),
            ({"lora_path": str(tmp_path / "a1")}, 400, "lora_name"),
        ]
        for body, status, message in bad:
            response = await http.post("/v1/load_lora_adapter", json=body)
            assert response.status_code == status and message in response.json()["error"]["message"], body
        gone = await http.post("/v1/unload_lora_adapter", json={"lora_name": "s2"})
        assert gone.status_code == 404 and "no LoRA adapter 's2'" in gone.json()["error"]["message"]
    assert same(weights(served), base, atol=0)


async def test_full_weights_replace_the_adapter_and_other_adapters_are_refused(
    served: Any, embedded_model_path: Path, tmp_path: Path
) -> None:
    from simulate.lora_merge import adapter_deltas

    base = weights(served)
    write_adapter(embedded_model_path, tmp_path / "a", seed=3)
    served.load_adapter(tmp_path / "a")
    served.load_weights(embedded_model_path)  # a full reload: the adapter goes with the old weights
    served.unload_adapter()  # nothing to restore: the reloaded weights stay
    assert same(weights(served), base, atol=0)

    write_adapter(embedded_model_path, tmp_path / "dora", seed=4, use_dora=True)
    with pytest.raises(ModelError, match="use_dora"):
        adapter_deltas(tmp_path / "dora", base)
    config = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "adapter_config.json").write_text(json.dumps({**config, "r": 0}))
    with pytest.raises(ModelError, match="rank"):
        adapter_deltas(tmp_path / "other", base)
    wrong = {k: v[:, :-1] if v.ndim == 2 else v for k, v in base.items()}  # another model's shapes
    with pytest.raises(ModelError, match="the layer is"):
        adapter_deltas(tmp_path / "a", wrong)
