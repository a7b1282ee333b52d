"""Evidence tables, Wilson intervals, trace compaction and the deterministic fallback ranking."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from diagnose.compact import approx_tokens, compact_trace
from diagnose.evidence import EpisodeInput, build_evidence, wilson_interval
from diagnose.fallback import env_score, fallback_report


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-3) and high == pytest.approx(0.7634, abs=1e-3)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_score_prefers_evidence_over_a_single_failure() -> None:
    assert env_score(8.0, 10) > env_score(1.0, 1)
    assert env_score(0.1 * 8, 10) < env_score(0.9 * 8, 10)  # simulator faults barely count


def _round(b: SimpleNamespace) -> list[EpisodeInput]:
    good = [
        b.call("get_order", {"order_id": "O-1"}),
        b.call("cancel_order", {"order_id": "O-1"}, writes=True),
    ]
    wrong = [
        b.call("get_order", {"order_id": "O-2"}),
        b.call("cancel_order", {"order_id": "O-2"}, writes=True),
    ]
    eps = [b.episode(f"shop/t1#{i}", b.transcript(wrong), b.verdict()) for i in range(6)]
    eps += [b.episode(f"shop/t1#{i}", b.transcript(good), b.verdict(True)) for i in range(6, 8)]
    bank_task = b.task("bank", reference=[("list_accounts", {})], tid="b1")
    bank_ok = b.transcript([b.call("list_accounts")], env="bank")
    eps += [b.episode(f"bank/b1#{i}", bank_ok, b.verdict(True), bank_task, env="bank") for i in range(7)]
    bank_fail = b.transcript(
        [b.call("list_accounts", ok=False, kind="internal")], env="bank", finish="env_error"
    )
    eps.append(b.episode("bank/b1#7", bank_fail, b.verdict(), bank_task, env="bank"))
    return eps


def test_build_evidence_aggregates(b: SimpleNamespace) -> None:
    ev = build_evidence(3, _round(b), {"shop": b.SHOP, "bank": b.BANK})
    shop = ev.env_stats("shop")
    assert shop is not None
    assert (shop.attempts, shop.passed) == (8, 2)
    assert shop.pass_rate == 0.25 and shop.pass_low < 0.25 < shop.pass_high
    assert shop.failures == {"wrong_entity": 6}
    assert shop.calls["cancel_order"].ok == 8
    assert shop.mean_reward == pytest.approx((6 * 0.0 + 2 * 1.0) / 8)
    bank = ev.env_stats("bank")
    assert bank is not None and bank.failures == {"simulator_fault": 1}
    assert bank.calls["list_accounts"].failed == 1 and bank.calls["list_accounts"].error_kinds == {
        "internal": 1
    }
    assert bank.finishes == {"answered": 7, "env_error": 1}
    assert {c.category for c in ev.categories} == {"Shopping", "Finance"}
    tool_rows = {(t.env, t.tool): t for t in ev.tools}
    assert tool_rows[("shop", "cancel_order")].attempts == 8
    assert list(tool_rows[("shop", "cancel_order")].calls) == ["cancel_order"]
    assert ev.overall.attempts == 16
    json.dumps(ev.tables())  # the sandbox gets it as JSON


def test_fallback_ranks_the_severe_env_first(b: SimpleNamespace) -> None:
    ev = build_evidence(3, _round(b), {"shop": b.SHOP, "bank": b.BANK})
    report = fallback_report(ev, reason="test")
    assert report.source == "fallback" and report.fallback_reason == "test"
    assert report.weak[0] == "shop"
    assert report.weak_envs[0].rank == 1 and 0 < report.weak_envs[0].score <= 1
    pattern = report.patterns[0]
    assert (pattern.env, pattern.category) == ("shop", "wrong_entity")
    assert pattern.episode_ids[0].startswith("shop/")
    guide = next(g for g in report.guidelines if g.env == "shop")
    assert set(guide.target_tools) <= set(b.SHOP.tools) and guide.target_tools
    assert guide.difficulty.ambiguity >= 1  # wrong entity: practise resolving references


def test_compact_trace_keeps_the_essentials_within_budget(b: SimpleNamespace) -> None:
    calls = [b.call("list_orders", output={"orders": ["x" * 50] * 20}, turn=i) for i in range(12)]
    calls.append(b.call("cancel_order", {"order_id": "O-1"}, ok=False, kind="tool_error", turn=12))
    t = b.task()
    t = t.model_copy(update={"instruction": "Please cancel my order O-1. " + "Really. " * 200})
    ep = b.episode("shop/t1#0", b.transcript(calls, answer="It is cancelled now."), b.verdict(), t)
    ev = build_evidence(1, [ep], {"shop": b.SHOP})
    for budget in (120, 400):
        text = compact_trace(ep, ev.episodes[0], budget_tokens=budget)
        assert approx_tokens(text) <= budget + 5
        assert "instruction: Please cancel my order O-1." in text
        assert "FAIL cancel_order" in text and "tool_error" in text
        assert "answer: It is cancelled now." in text
    assert text.count(" ok list_orders") > compact_trace(ep, ev.episodes[0], budget_tokens=120).count(
        " ok list_orders"
    )
