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


def record_loads(served: Any, *methods: str) -> list[tuple[str, str]]:
    """Wrap the served model's weight-loading `methods`: each call adds (method, folder name)."""
    loads: list[tuple[str, str]] = []
    for method in methods:
        original = getattr(served, method)

        def recording(path: str | Path, original: Any = original, method: str = method) -> None:
            original(path)
            loads.append((method, Path(path).name))

        setattr(served, method, recording)
    return loads


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
    loads = record_loads(served, "load_weights")
    seen: list[StepMetrics] = []
    async with serving(create_app(served, name="policy", allow_reload=True)) as url:
        publisher = HttpWeightPublisher(url, tmp_path / "shared")
        # Groups of 6: a group whose samples all score alike is dropped (no gradient, no importance
        # ratio), and with 4 that happened to one step in a few dozen runs.
        config = tiny_config(max_steps=2, group_size=6, rollout_backend="http", rollout_base_url=url + "/v1")
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
    assert result.steps == 2 and result.episodes == 12 and all(m.finite() for m in seen)
    assert len(turns_served) >= result.episodes  # every policy turn was sampled by the server
    assert all(m.tokens_per_s and m.tokens_per_s > 0 for m in seen)
    # The server's log-probs came back with the samples, and each step weighted its tokens by the
    # importance ratio against them: the same fp32 weights on both sides, so the ratios sit near 1.
    trained = [m for m in seen if m.zero_variance_fraction != 1.0]
    assert trained, "every group scored alike: nothing trained"
    for m in trained:
        assert m.importance_ratio_mean is not None and m.importance_ratio_max is not None
        assert 0.9 < m.importance_ratio_mean < 1.1 and m.importance_ratio_max <= 3.0
    # The server loaded the starting weights, then each update; the shared folder keeps the newest two.
    reloads = [folder for _, folder in loads]
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


async def test_multi_turn_http_rollouts_train_every_turn_of_one_token_chain(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """20 GRPO rollouts of tool-using tasks over HTTP: every turn extends the episode's one chain.

    Nothing is re-rendered: the trainer's renderer sends token ids and gets the sampled ids back,
    so tool results are appended to the same chain and every policy turn is trained. The served
    policy is the embedded model after the round's own SFT warm-up (5 steps on the tasks'
    reference calls): before it, the 135M model calls no tool at all (0 of 20 episodes).
    """
    from transformers import AutoTokenizer

    from arena.env.registry import Registry
    from simulate.fidelity import usable_tasks
    from simulate.local import LocalChatModel
    from simulate.token_chat import TokenChatModel
    from trainer.config import SftConfig
    from trainer.rollout import RolloutBridge
    from trainer.samples import training_sample
    from trainer.sft import sft_warmup
    from work.tasks import prepare_tasks

    library = Registry().load_all()["library"]
    raw = usable_tasks(library, 5, [])
    sft = SftConfig(epochs=1.0, learning_rate=3e-4, batch_size=1)
    config = tiny_config(group_size=4, sft=sft, rollout_concurrency=20)
    episode = {"max_turns": 2, "max_tokens_per_turn": 48, "max_total_tokens": 4096}
    config = config.model_copy(update={"episode": config.episode.model_copy(update=episode)})
    warm = await sft_warmup(0, raw, embedded_model_path, tmp_path, config, envs={"library": library})
    assert warm.steps == 5
    tasks, _ = await prepare_tasks(raw, {"library": library}, system_prompt="compact", tool_subset=0)
    served = LocalChatModel.load(warm.policy_dir, device="cpu", dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(str(warm.policy_dir))
    async with serving(create_app(served, name="policy")) as url:
        policy = TokenChatModel(url + "/v1", "policy", tokenizer, role="policy")
        bridge = RolloutBridge(tasks, config, policy_factory=lambda trainer: policy)
        episodes = await bridge.rollout([t.key for t in tasks for _ in range(4)], policy)

    assert len(episodes) == 20
    transcripts = [t for t, _ in episodes]
    assert sum(bool(t.calls) for t in transcripts) >= 5, [t.finish for t in transcripts]
    for transcript in transcripts:
        assert transcript.chain_breaks == [] and len(transcript.chains) == 1
        policy_turns = [s for s in transcript.chains[0].segments if s.kind == "policy"]
        assert len(policy_turns) == transcript.num_turns  # every turn is in the trained chain
        _, _, mask, logprobs = training_sample(transcript, pad_id=0)
        assert sum(mask) == sum(len(s.token_ids) for s in policy_turns)
        assert all(lp == lp for lp, m in zip(logprobs, mask, strict=True) if m)  # the server's, no NaN
    # Where a tool was called and the policy spoke again, the result sits between its turns at mask 0.
    later = [t for t in transcripts if t.calls and t.num_turns == 2]
    assert later and all(any(s.kind != "policy" for s in t.chains[0].segments[1:-1]) for t in later)


async def test_a_lora_round_syncs_each_update_to_the_server_as_its_adapter(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """Megabytes per step instead of the model: the round's full weights once, then adapters."""
    import torch
    from safetensors.torch import load_file

    from simulate.local import LocalChatModel
    from trainer.config import LoraConfig

    served = LocalChatModel.load(embedded_model_path, device="cpu", dtype="float32")
    loads = record_loads(served, "load_weights", "load_adapter")
    seen: list[StepMetrics] = []
    lora = LoraConfig(enabled=True, r=8, alpha=16)
    async with serving(create_app(served, name="policy", allow_reload=True)) as url:
        publisher = HttpWeightPublisher(url, tmp_path / "shared")
        config = tiny_config(max_steps=2, rollout_backend="http", rollout_base_url=url + "/v1", lora=lora)
        result = await train_round(
            0,
            [letters_task()],
            embedded_model_path,
            tmp_path / "out",
            config,
            seen.append,
            publisher=publisher,
        )
    assert result.steps == 2 and all(m.finite() for m in seen)
    # The round's full weights once, then each step's adapter (step 2's rollouts sampled from step 1's).
    assert [f"{method}:{folder}" for method, folder in loads] == [
        "load_weights:round-0000-step-000000",
        "load_adapter:policy-lora-r0000-s000001",
        "load_adapter:policy-lora-r0000-s000002",
    ]
    model_bytes = (embedded_model_path / "model.safetensors").stat().st_size
    assert [m.sync_kind for m in seen] == ["lora", "lora"]
    assert all(m.sync_bytes and m.sync_bytes < model_bytes / 20 and m.sync_seconds for m in seen)
    assert publisher.served_model == "policy-lora-r0000-s000002"
    # The server serves what the round's last checkpoint holds (the merged weights).
    final = load_file(str(result.policy_dir / "model.safetensors"))
    state = served._model.state_dict()
    assert all(torch.allclose(state[k], final[k], atol=1e-5) for k in final if k in state)
    assert not torch.equal(
        state["model.layers.0.self_attn.q_proj.weight"],
        load_file(str(embedded_model_path / "model.safetensors"))["model.layers.0.self_attn.q_proj.weight"],
    )
