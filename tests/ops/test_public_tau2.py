"""τ²-bench in the daemon's public yardstick, with scripted fakes (policy, user and judge): the same
seeded sample of each imported domain every round, a measured policy reused, the summary in the
round's report record, and why it did not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arena.public.tau2.domains import domain_tools
from arena.public.tau2.importer import import_tau2
from arena.public.tau2.model import load_domain
from arena.store import Store, public_runs
from ops.report import round_record

from .tau2_fakes import ScriptedTau2Helper, ScriptedTau2Policy

pytestmark = pytest.mark.anyio
MINI = Path(__file__).resolve().parents[1] / "arena" / "public" / "tau2" / "mini"


def with_tau2(config: Any) -> Any:
    """The mini retail domain imported where the daemon looks (DATA_DIR/public/tau2/retail)."""
    import_tau2(MINI, "retail", config.data.dir / "public" / "tau2" / "retail")
    return config


async def test_the_same_tasks_run_every_round_and_a_measured_policy_is_reused(
    make_config: Any, phase_context: Any
) -> None:
    from ops.phases import public_tau2

    config = with_tau2(make_config(ARENA_PUBLIC__TAU2_PER_DOMAIN="4"))
    domain = load_domain(config.data.dir, "retail")
    policy, helper = ScriptedTau2Policy(domain.tasks), ScriptedTau2Helper()
    async with Store(config.database_url) as store:
        await store.migrate()

        def ctx(round_no: int) -> Any:
            return phase_context(config, store, round_no, phase="evaluate", policy=policy, helper=helper)

        first = await public_tau2.measure(ctx(1), stage="live", policy="base")
        assert first.state == "measured" and first.benchmark == "tau2"
        assert len(first.entries) == 4 and all(e.startswith("retail/") for e in first.entries)
        assert first.version == f"retail@{domain.manifest.commit or 'unknown'}"[:60]
        # The gold played by the scripted policy passes every sampled task by τ²'s reward.
        assert list(first.categories) == ["retail"] and first.categories["retail"].passed == 4
        # NL assertions are the helper judge's: its measured agreement (none stored here) rides along.
        assert first.judge is not None and first.judge["agreement"] is None
        calls = policy.calls
        again = await public_tau2.measure(ctx(2), stage="live", policy="base")
        assert again.entries == first.entries and again.reused_from == {"round": 1, "stage": "live"}
        assert policy.calls == calls  # copied, not played again
        other = await public_tau2.measure(ctx(3), stage="live", policy="round-0002")
        assert other.entries == first.entries and other.reused_from is None and policy.calls > calls
        async with store.transaction() as s:
            rows = await public_runs.runs(s, 3, "live", "tau2")
        assert [r.category for r in rows] == ["retail"] * 4 and all(r.passed for r in rows)
    record = round_record(3, "completed", {"evaluate": {"public_tau2": other.model_dump(mode="json")}})
    assert record["public_tau2"]["overall"]["passed"] == 4


async def test_a_policy_that_does_not_do_the_work_fails_and_the_failure_is_named(
    make_config: Any, phase_context: Any
) -> None:
    from ops.phases import public_tau2

    config = with_tau2(make_config(ARENA_PUBLIC__TAU2_PER_DOMAIN="50"))  # every task of the mini domain
    async with Store(config.database_url) as store:
        await store.migrate()
        # Recognizes no task: answers every request without a call.
        ctx = phase_context(
            config, store, 1, phase="evaluate", policy=ScriptedTau2Policy([]), helper=ScriptedTau2Helper()
        )
        summary = await public_tau2.measure(ctx, stage="live", policy="base")
        async with store.transaction() as s:
            rows = {r.entry_id: r for r in await public_runs.runs(s, 1, "live", "tau2")}
    domain, tools = load_domain(config.data.dir, "retail"), domain_tools("retail")
    writes = {
        t.id
        for t in domain.tasks
        if "DB" in t.evaluation_criteria.reward_basis
        and any(tools[a.name].writes for a in t.evaluation_criteria.actions if a.name in tools)
    }
    assert writes
    for task_id in writes:
        row = rows[f"retail/{task_id}"]
        assert not row.passed and row.error_type == "db"
    assert summary.overall is not None and summary.overall.passed < summary.overall.n


async def test_why_it_does_not_run(make_config: Any, phase_context: Any) -> None:
    from ops.phases import public_tau2

    async with Store(make_config().database_url) as store:
        await store.migrate()
        absent = await public_tau2.measure(
            phase_context(make_config(), store, 1, phase="evaluate"), stage="live", policy="base"
        )
        off = await public_tau2.measure(
            phase_context(make_config(ARENA_PUBLIC__TAU2_PER_DOMAIN="0"), store, 1, phase="evaluate"),
            stage="live",
            policy="base",
        )
    assert absent.state == "not_imported" and "import-tau2" in absent.note
    assert off.state == "off"


async def test_the_step_cap_and_the_domains_settings_act(make_config: Any, phase_context: Any) -> None:
    from ops.phases import public_tau2

    capped = with_tau2(make_config(ARENA_PUBLIC__TAU2_PER_DOMAIN="50", ARENA_PUBLIC__TAU2_MAX_STEPS="2"))
    domain = load_domain(capped.data.dir, "retail")
    async with Store(capped.database_url) as store:
        await store.migrate()
        ctx = phase_context(
            capped,
            store,
            1,
            phase="evaluate",
            policy=ScriptedTau2Policy(domain.tasks),
            helper=ScriptedTau2Helper(),
        )
        summary = await public_tau2.measure(ctx, stage="live", policy="base")
    # Two steps (the greeting and the user's request) leave the gold policy no turn: every task that
    # starts fresh ends capped (a task opening on a message history starts further on).
    fresh = [t for t in domain.tasks if t.initial_state is None or not t.initial_state.message_history]
    assert summary.overall is not None and summary.overall.passed == 0
    assert summary.errors["max_steps"] == len(fresh)
    airline_only = with_tau2(make_config(ARENA_PUBLIC__TAU2_DOMAINS="airline"))
    async with Store(airline_only.database_url) as store:
        await store.migrate()
        none = await public_tau2.measure(
            phase_context(airline_only, store, 1, phase="evaluate"), stage="live", policy="base"
        )
    assert none.state == "not_imported" and "airline" in none.note
