"""One real round end to end: the six real phases on the embedded model, with the admin API live.

Tiny sizes (one arena environment, one evaluation task, one training task, G = 2, one GRPO step)
so the whole round fits in a few minutes on a 2-core CPU. Checks what each phase leaves in the
store (episodes, report, curriculum, tasks, checkpoint lineage), the metrics they feed, that
/status and /metrics answer throughout, and that a restarted daemon runs the published policy.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import pytest

from arena.store import Store, repo
from ops.daemon import Daemon
from ops.phases.base import PHASE_ORDER


def tiny(model: Path) -> dict[str, str]:
    """A round as small as a real one gets."""
    return {
        "ARENA_MODELS__POLICY__MODEL": str(model),
        "ARENA_MODELS__HELPER__MODEL": str(model),
        "ARENA_ROUND__EVAL_ENVS_PER_CATEGORY": "1",
        "ARENA_ROUND__EVAL_MAX_ENVS": "1",
        "ARENA_ROUND__EVAL_SIMULATED": "false",
        "ARENA_ROUND__EVAL_TASKS_PER_ENV": "1",
        "ARENA_ROUND__SAMPLES_PER_TASK": "2",
        "ARENA_ROUND__TRAIN_STEPS": "1",
        "ARENA_ROUND__MAX_TURNS": "2",
        "ARENA_ROUND__MAX_TOKENS_PER_TURN": "48",
        "ARENA_CURRICULUM__TASKS_PER_ROUND": "1",
        "ARENA_ROUND__YARDSTICK_TASKS_PER_LEVEL": "1",
        "ARENA_ROUND__YARDSTICK_AFTER_WARMUP": "true",
        # The round's caps, not each task's fitted ones: a yardstick episode of 2 turns instead of
        # up to 6 (every yardstick prompt holds all the env's tools, ~2,300 tokens); the three runs
        # (base, warm-up, candidate) were half of this round's time. test_yardstick checks "fit".
        "ARENA_ROUND__YARDSTICK_CAPS": "round",
        # The agent's prompt (~3k tokens of evidence) is the slowest call of a CPU round; its
        # wiring runs in `make run` and diagnose's own real-model tests. Here: the statistical path.
        "ARENA_DIAGNOSIS__AGENT": "false",
        "ARENA_SYNTHESIS__NEW_ENVS_PER_ROUND": "0",  # the 135M helper cannot write an environment
        "ARENA_TRAINER__TASKS_PER_STEP": "1",
        "ARENA_TRAINER__SFT__EPOCHS": "1",
        "ARENA_TRAINER__WARMUP_TASKS_PER_ENV": "1",
        "ARENA_TRAINER__WARMUP_MAX_TASKS": "2",
        "ARENA_TRAINER__SYSTEM_PROMPT": "compact",
        "ARENA_TRAINER__TOOL_SUBSET": "1",
        "ARENA_TRAINER__BASE_MODEL": str(model),
        "ARENA_DAEMON__MAX_PHASE_FAILURES": "1",
    }


def metric(text: str, name: str) -> float:
    """The sum of every sample of `name` in an exposition."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


@pytest.mark.anyio
@pytest.mark.model
@pytest.mark.slow
async def test_one_real_round_with_admin_api_live(make_config, embedded_model_path, run_daemon) -> None:
    config = make_config(**tiny(embedded_model_path))
    daemon = Daemon(config, max_rounds=1, handle_signals=False)
    phases_seen: set[str] = set()
    async with run_daemon(daemon) as client:
        with anyio.fail_after(600):
            while daemon.rounds_completed < 1 and not daemon.paused:
                try:
                    status = await client.get("/status", timeout=5)
                    scraped = await client.get("/metrics", timeout=5)
                except httpx.ConnectError:
                    # The admin API goes down only as the daemon exits after its one round.
                    assert daemon.rounds_completed == 1
                    break
                assert status.status_code == 200 and scraped.status_code == 200
                if status.json()["phase"]:
                    phases_seen.add(status.json()["phase"])
                await anyio.sleep(0.5)
        assert not daemon.paused, "the daemon paused itself: a phase failed (see phase.failed in the log)"
    exposition = daemon.metrics.exposition().decode()  # what /metrics served last
    assert {"evaluate", "train"} <= phases_seen

    store = Store(config.database_url)
    try:
        async with store.transaction() as s:
            rows = await repo.get_phases(s, 1)
            assert [rows[p].status for p in PHASE_ORDER] == ["done"] * 6
            outputs = {p: rows[p].output for p in PHASE_ORDER}
            evals = await repo.episodes_for_round(s, 1, purpose="eval")
            report = await repo.get_diagnosis(s, 1)
            curriculum = await repo.curriculum_states(s)
            checkpoint = await repo.latest_checkpoint(s, published=True)
            task_rows = await repo.tasks_for_round(s, 1)
    finally:
        await store.aclose()

    # EVALUATE: a fresh synthesized task in a held-out env, its episode stored.
    ev = outputs["evaluate"]
    assert len(ev["evaluated"]) == 1 and set(ev["evaluated"]) <= set(ev["arena"])
    assert not set(ev["arena"]) & set(ev["training"])
    assert len(evals) == 1 and evals[0].env == ev["evaluated"][0] and evals[0].transcript["messages"]
    assert ev["pass_rates"].keys() == {evals[0].env}
    # DIAGNOSE: the stored report (the statistical ranking, the agent being off).
    assert report is not None and report.source == "fallback"
    assert outputs["diagnose"]["report"]["episodes"] == 1
    # PLAN: curriculum rows for arena and training envs; the budget only on training envs.
    assert set(ev["arena"]) | set(ev["training"]) >= set(curriculum)
    budget = outputs["plan"]["allocation"]["tasks"]
    assert sum(budget.values()) == 1 and set(budget) <= set(ev["training"])
    # SYNTHESIZE: the training task, stored with the round.
    trained = outputs["synthesize"]["tasks"]
    assert len(trained) == 1 and trained[0]["env"] in budget
    assert {t.id for t in task_rows} >= {trained[0]["id"], evals[0].task_id}
    # TRAIN: SFT warm-up of the fresh policy, then one GRPO step with a checkpoint.
    train = outputs["train"]
    assert train["sft"]["phase"] == "sft" and train["steps"] == 1
    # ... on the warm-up set: tasks of training environments, never of the yardstick's or the arena's.
    assert sum(train["warmup_tasks"].values()) == 2 and set(train["warmup_tasks"]) <= set(ev["training"])
    # The yardstick: drawn in the evaluated arena env, run with every tool for the base policy
    # (EVALUATE) and the trained one (PUBLISH's gate), which decided.
    yard = ev["yardstick"]
    assert yard["policy"] == "base" and yard["tool_subset"] is None and ev["tool_subset"] == 1
    assert 1 <= yard["overall"]["n"] <= 3 and set(yard["envs"]) <= set(ev["arena"])
    assert outputs["publish"]["yardstick"]["overall"]["n"] == yard["overall"]["n"]
    # ... and the warmed-up policy between them, so the round's change splits into two shares.
    warm = train["warmup_yardstick"]
    assert warm["stage"] == "warmup" and warm["policy"] == "round-0001-warmup"
    assert warm["overall"]["n"] == yard["overall"]["n"]
    assert outputs["publish"]["gate"]["reason"]
    published = outputs["publish"]["policy"] == "updated"
    assert metric(exposition, "arena_publish_decisions_total") == 1
    assert metric(exposition, "arena_yardstick_overall_pass_rate_high") > 0
    if published:
        # PUBLISH: lineage row pointing at the checkpoint folder, weights loaded into the policy.
        assert checkpoint is not None and checkpoint.path == train["checkpoint"] and checkpoint.round == 1
        lineage = json.loads((Path(checkpoint.path) / "lineage.json").read_text())
        assert lineage["round_id"] == 1 and lineage["phase"] == "grpo"
        assert daemon.models.policy_weights == Path(checkpoint.path)
    else:  # a first step worse on the yardstick is held back: the base weights stay live
        assert checkpoint is None and daemon.models.policy_weights == Path(train["parent_dir"])
    # Metrics fed by the phases.
    assert metric(exposition, "arena_grpo_steps_total") == 1
    assert metric(exposition, "arena_checkpoints_total") == (1 if published else 0)
    assert metric(exposition, 'arena_synthesis_gate_total{gate="gold",result="accepted"}') >= 2
    assert metric(exposition, 'arena_model_call_duration_seconds_count{backend="local",role="policy"}') >= 1
    assert metric(exposition, "arena_rounds_total") == 1
