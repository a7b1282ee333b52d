"""GRPO whose rollouts come over HTTP from a model server that the trainer publishes to after each step.

The server is `arena serve-model`'s app over the real embedded model with vLLM's reload endpoints
(`simulate.serve_reload`), on 127.0.0.1: the same requests and reloads a vLLM server gets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from simulate.serve import create_app, serving
from trainer.grpo import train_round
from trainer.metrics import StepMetrics
from trainer.publish import HttpWeightPublisher

from .tiny import letters_task, tiny_config

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.anyio]


async def test_http_rollouts_sample_from_the_server_that_each_update_is_published_to(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    import torch
    from safetensors.torch import load_file

    from simulate.local import LocalChatModel

    served = LocalChatModel.load(embedded_model_path, device="cpu", dtype="float32")
    turns_served: list[int] = []
    # Every decode the server runs, through /v1/chat/completions or (token-exact rollouts)
    # /v1/completions, goes through the model's batcher.
    submit = served.batcher.submit

    async def counting_submit(*args: Any, **kwargs: Any) -> Any:
        turns_served.append(1)
        return await submit(*args, **kwargs)

    served.batcher.submit = counting_submit  # type: ignore[method-assign]
    reloads: list[str] = []
    load_weights = served.load_weights

    def recording_load(path: str | Path) -> None:
        load_weights(path)
        reloads.append(Path(path).name)

    served.load_weights = recording_load  # type: ignore[method-assign]
    seen: list[StepMetrics] = []
    async with serving(create_app(served, name="policy", allow_reload=True)) as url:
        publisher = HttpWeightPublisher(url, tmp_path / "shared")
        config = tiny_config(max_steps=2, rollout_backend="http", rollout_base_url=url + "/v1")
        result = await train_round(
            0,
            [letters_task()],
            embedded_model_path,
            tmp_path / "out",
            config,
            seen.append,
            publisher=publisher,
        )
        # The server refuses what it cannot load and keeps serving the weights it has.
        async with httpx.AsyncClient(base_url=url) as http:
            bad = await http.post(
                "/collective_rpc",
                json={"method": "reload_weights", "kwargs": {"weights_path": str(tmp_path)}},
            )
            assert bad.status_code == 400 and "no safetensors weights" in bad.json()["error"]["message"]
            other = await http.post("/collective_rpc", json={"method": "sleep"})
            assert other.status_code == 400 and "reload_weights" in other.json()["error"]["message"]
    assert result.steps == 2 and result.episodes == 8 and all(m.finite() for m in seen)
    assert len(turns_served) >= result.episodes  # every policy turn was sampled by the server
    assert all(m.tokens_per_s and m.tokens_per_s > 0 for m in seen)
    # The server loaded the starting weights, then each update; the shared folder keeps the newest two.
    assert reloads == ["round-0000-step-000000", "round-0000-step-000001", "round-0000-step-000002"]
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == [
        "round-0000-step-000001",
        "round-0000-step-000002",
    ]
    # The served weights are the trained ones, not the base model's.
    final = load_file(str(result.policy_dir / "model.safetensors"))
    base = load_file(str(embedded_model_path / "model.safetensors"))
    state = served._model.state_dict()
    changed = [k for k in final if not torch.equal(final[k], base[k])]
    assert changed and all(torch.equal(state[k].cpu(), final[k]) for k in changed)
