"""`arena report` and `arena status` over stored phase outputs (hand-written in the phases' shapes)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from arena.store import Store, YardstickRunRow, repo, repo_yardstick
from ops.cli import main
from ops.config import ArenaConfig
from ops.phases.base import PHASE_ORDER
from ops.phases.yardstick_scores import summarize


def runs(passed: list[bool]) -> list[SimpleNamespace]:
    levels = ["easy", "medium", "hard"]
    return [
        SimpleNamespace(task_id=f"t{i}", env="banking", level=levels[i % 3], passed=p)
        for i, p in enumerate(passed)
    ]


def outputs(round_no: int, *, held_back: bool) -> dict[str, dict[str, Any]]:
    live = summarize(runs([True, True, False, True, False, False]), stage="live", policy="base")
    candidate = summarize(runs([False] * 6), stage="candidate", policy=f"round-{round_no:04d}")
    return {
        "evaluate": {
            "pass_rates": {"banking": 0.25},
            "category_pass_rates": {"Finance": 0.25},
            "tool_subset": 0,
            "yardstick": {**live.model_dump(mode="json"), "reused_from": None},
        },
        "diagnose": {
            "source": "agent",
            "report": {
                "weak_envs": [{"env": "banking", "rank": 1, "score": 0.8, "pass_rate": 0.25}],
                "patterns": [
                    {
                        "env": "banking",
                        "category": "wrong_args",
                        "description": "ids swapped",
                        "motif": "id_chain",
                    }
                ],
            },
        },
        "plan": {
            "allocation": {"tasks": {"library": 3, "calendar": 0}},
            "guidelines": [
                {"env": "library", "failure_pattern": "ids swapped", "motif": "id_chain", "n_tasks": 3}
            ],
            "decisions": [
                {"env": "library", "action": "raise", "reason": "18/20 passed, interval above the band"},
                {"env": "calendar", "action": "hold", "reason": "3 episodes"},
                {"env": "weather", "action": "insufficient", "reason": "0 episode(s): hold"},
            ],
        },
        "synthesize": {
            "tasks": [
                {
                    "id": "library/a",
                    "env": "library",
                    "origin": "targeted",
                    "motif": "id_chain",
                    "exercises": ["id_chain"],
                },
                {"id": "library/b", "env": "library", "origin": "targeted", "motif": "id_chain"},
                {"id": "library/c", "env": "library", "origin": "graph"},
            ],
            "acceptance": 0.75,
        },
        "train": {
            "steps": 1,
            "reward_mean": 0.4,
            "pass_rate": 0.3,
            # Round 2 had an episode whose prompt was re-rendered (its later turns were not trained)
            # and one that ended on an environment failure (left out of its group).
            "grpo": {
                "groups": 2,
                "zero_variance_groups": 1,
                "episodes": 8,
                "chain_breaks": round_no - 1,
                "infra_errors": round_no - 1,
            },
        },
        "publish": {
            "policy": "held back" if held_back else "updated",
            "checkpoint": "/x",
            "gate": {"publish": not held_back, "reason": "yardstick 0.00 below the parent's 95% interval"},
            "yardstick": candidate.model_dump(mode="json"),
        },
    }


# The live policy's yardstick per round, and round 1's stages within (warm-up, then the candidate).
LIVE = {1: [True, True, False, True, False, False], 2: [True, True, True, True, True, False]}
WARMUP = [True, True, True, True, False, False]


async def store_rounds(url: str) -> None:
    async with Store(url) as store:
        await store.migrate()
        for round_no in (1, 2):
            async with store.transaction() as s:
                await repo.ensure_round(s, round_no)
                outs = outputs(round_no, held_back=round_no == 2)
                for name in PHASE_ORDER:
                    await repo.finish_phase(s, round_no, name, outs[name], complete_round=name == "publish")
                stages = {"live": LIVE[round_no]} | (
                    {"warmup": WARMUP, "candidate": LIVE[2]} if round_no == 1 else {}
                )
                for stage, passed in stages.items():
                    for r in runs(passed):
                        row = YardstickRunRow(
                            round=round_no,
                            stage=stage,
                            task_id=r.task_id,
                            env=r.env,
                            level=r.level,
                            passed=r.passed,
                        )
                        await repo_yardstick.add_run(s, row)


@pytest.mark.anyio
async def test_report_gives_each_rounds_chain_from_yardstick_to_publish(
    make_config, monkeypatch, capsys
) -> None:
    config = make_config()
    await store_rounds(config.database_url)
    monkeypatch.setenv("ARENA_DATA_DIR", str(config.data.dir))

    async def arena(*args: str) -> int:  # the CLI runs its own event loop: give it a thread
        return await anyio.to_thread.run_sync(main, list(args))

    assert await arena("report", "--json", "--rounds", "1:2") == 0
    records = json.loads(capsys.readouterr().out)["rounds"]
    assert [r["round"] for r in records] == [1, 2]
    first, second = records
    assert first["yardstick"]["overall"]["passed"] == 3 and first["yardstick"]["overall"]["n"] == 6
    assert first["yardstick"]["envs"]["banking"]["easy"]["n"] == 2
    assert "reference tools + 0 distractors" in first["fresh"]["tool_view"]
    assert "reference tools + 0 distractors" in first["train"]["tool_view"]
    assert first["diagnosis"]["weak_envs"][0]["env"] == "banking"
    assert first["diagnosis"]["patterns"][0]["motif"] == "id_chain"
    assert first["plan"]["budget"] == {"library": 3} and first["plan"]["held"] == 2
    assert [d["action"] for d in first["plan"]["decisions"]] == ["raise"]
    # JSON keeps every decision; the terminal leads with what changed and counts the rest.
    assert [d["action"] for d in first["plan"]["holds"]] == ["hold", "insufficient"]
    assert first["synthesize"]["per_origin"] == {"targeted": 2, "graph": 1}
    assert first["synthesize"]["per_motif"] == {"id_chain": 2}
    assert first["synthesize"]["exercises"] == {"id_chain": 1}
    assert first["train"]["zero_variance_groups"] == 1
    assert first["train"]["chain_breaks"] == 0 and second["train"]["chain_breaks"] == 1
    assert first["train"]["infra_errors"] == 0 and second["train"]["infra_errors"] == 1
    assert first["publish"]["policy"] == "updated" and second["publish"]["policy"] == "held back"
    # The yardstick by round: round 2 against round 1 (3/6 -> 5/6), paired over the same six tasks,
    # and round 1 split into the warm-up's share (+1) and GRPO's (+1); every task's outcome listed.
    assert (
        "since_first" not in (first["yardstick_by_round"] or {})
        or first["yardstick_by_round"]["since_first"] is None
    )
    change = second["yardstick_by_round"]["since_first"]
    assert (change["gained"], change["lost"], change["tasks"]) == (2, 0, 6)
    assert second["yardstick_by_round"]["since_previous"] == change
    assert first["yardstick_by_round"]["warmup_change"]["gained"] == 1
    assert first["yardstick_by_round"]["grpo_change"]["gained"] == 1
    assert second["yardstick_by_round"]["outcomes"] == {f"t{i}": p for i, p in enumerate(LIVE[2])}

    assert await arena("report", "--rounds", "2") == 0
    text = capsys.readouterr().out
    assert text.startswith("yardstick by round") and "round 1 (" not in text
    assert "since round 1     +0.33 [" in text and "(2 gained, 0 lost)" in text
    assert "yardstick   0.50 [" in text and "(3/6)" in text
    assert "publish     held back: yardstick 0.00 below" in text
    assert "raise     library: 18/20 passed" in text
    assert "; 2 held (1 with too few episodes)" in text and "insufficient" not in text
    assert "by motif  id_chain 2" in text
    assert "warning   1 of 8 episodes broke their token chain" in text
    assert "warning   1 of 8 episodes ended on an environment or model failure" in text
    assert await arena("report", "--rounds", "1") == 0
    text = capsys.readouterr().out
    assert "broke their token chain" not in text and "model failure" not in text
    assert await arena("report", "--rounds", "3:1") == 2
    assert await arena("report", "--rounds", "x") == 2


@pytest.mark.anyio
async def test_status_shows_the_yardstick_the_fresh_tool_view_and_the_publish_decision(make_config) -> None:
    from ops.commands.admin import _render_status
    from ops.status import status_document

    config = make_config()
    await store_rounds(config.database_url)
    async with Store(config.database_url) as store:
        daemon = SimpleNamespace(
            store=store, round=3, phase="evaluate", stopping=False, ready=True, models_up=True,
            sandbox={"available": True, "detail": "bubblewrap"}, progress_state={}, rounds_completed=2,
            paused=False, paused_since=None, config=ArenaConfig(), cluster=None,
        )  # fmt: skip
        doc = await status_document(daemon, "0.1.0")  # type: ignore[arg-type]
        # Before the store is migrated (start-up), /status answers without reading it.
        starting = SimpleNamespace(**{**vars(daemon), "ready": False, "store": None, "paused": False})
        early = await status_document(starting, "0.1.0")  # type: ignore[arg-type]
        assert early["ready"] is False and "not migrated" in early["note"]
        assert "round:      None" in _render_status(early)
    assert doc["last_completed_round"] == 2 and doc["last_yardstick"]["overall"]["n"] == 6
    assert doc["last_publish"]["policy"] == "held back"
    # The last change, paired over the same tasks (round 2 against round 1 and its previous).
    assert doc["last_yardstick"]["change_round"] == 2 and doc["last_yardstick"]["since_first"]["gained"] == 2
    text = _render_status(doc)
    assert "yardstick:  0.50 [" in text and "banking" in text
    assert "since round 1                +0.33 [" in text and "(round 2, paired)" in text
    assert "fresh tasks (reference tools + 0 distractors (trainer.tool_subset)):" in text
    assert "publish:    held back (yardstick 0.00 below" in text


@pytest.mark.anyio
async def test_report_reads_a_round_stored_before_the_simulated_rename(make_config) -> None:
    """Rows written when the gate was "cheap" (`cheap_gate`, `cheap.withheld`) still read back."""
    from ops.report import read_records

    old_gate = {"open": False, "why": "no measured judge false-pass rate", "helper": "h", "limit": 0.1}
    new_gate = {**old_gate, "open": True, "why": "simulation.max_false_pass = 1"}
    config = make_config()
    async with Store(config.database_url) as store:
        await store.migrate()
        async with store.transaction() as s:
            for round_no, plan in ((1, {"cheap_gate": old_gate}), (2, {"simulated_training_gate": new_gate})):
                await repo.ensure_round(s, round_no)
                await repo.finish_phase(s, round_no, "plan", {"allocation": {"tasks": {}}, **plan})
            await repo.record_event(s, "curriculum", "cheap.withheld", old_gate)
        async with store.transaction() as s:
            old, new = await read_records(s, None, None)
            [event] = await repo.list_events(s)
    assert old["plan"]["simulated_training_gate"]["why"] == old_gate["why"]
    assert not old["plan"]["simulated_training_gate"]["open"]
    assert new["plan"]["simulated_training_gate"]["open"]
    assert (event.action, event.detail["why"]) == ("cheap.withheld", old_gate["why"])
