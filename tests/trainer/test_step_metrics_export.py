"""GRPO step records reach Prometheus: chain breaks counted, the sampler mismatch, ratios and weight syncs set."""

from __future__ import annotations

from types import SimpleNamespace

from ops.metrics import Metrics
from ops.phases.train import step_observer
from trainer.metrics import StepMetrics


def test_chain_breaks_and_the_off_policy_mismatch_are_exported() -> None:
    metrics = Metrics()
    ctx = SimpleNamespace(
        metrics=metrics,
        config=SimpleNamespace(round=SimpleNamespace(train_steps=4)),
        progress=lambda *a: None,
    )
    on_step = step_observer(ctx)
    for breaks, sync in ((2, ("full", 1_000_000, 4.0)), (0, ("lora", 2_000, 0.5)), (1, None)):
        on_step(
            StepMetrics(
                phase="grpo",
                round_id=0,
                step=1,
                loss=0.1,
                chain_breaks=breaks,
                sampler_logprob_diff=0.03,
                importance_ratio_mean=1.01,
                importance_ratio_min=0.4,
                importance_ratio_max=3.0,
                sync_kind=sync[0] if sync else None,
                sync_bytes=sync[1] if sync else None,
                sync_seconds=sync[2] if sync else None,
            )
        )
    value = metrics.registry.get_sample_value
    assert value("arena_rollout_chain_breaks_total") == 3
    assert value("arena_grpo_sampler_logprob_diff") == 0.03
    assert value("arena_grpo_importance_ratio", {"stat": "max"}) == 3.0
    assert value("arena_grpo_importance_ratio", {"stat": "min"}) == 0.4
    # Each kind of weight sync keeps its last size and time (a step without one leaves them).
    assert value("arena_weight_sync_bytes", {"kind": "full"}) == 1_000_000
    assert value("arena_weight_sync_bytes", {"kind": "lora"}) == 2_000
    assert value("arena_weight_sync_seconds", {"kind": "lora"}) == 0.5
