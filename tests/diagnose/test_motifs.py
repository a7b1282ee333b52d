"""Weak motifs: episodes whose tasks exercise a motif fail more than the rest, beyond the interval."""

from __future__ import annotations

from types import SimpleNamespace

from diagnose.evidence import build_evidence
from diagnose.fallback import fallback_report
from diagnose.motifs import weak_motifs


def _episodes(b: SimpleNamespace, failing: int, passing: int) -> list:
    lookup = b.task(reference=[("search_orders", {"query": "pizza"})], tid="look")
    chain = b.task(tid="chain")  # get_order -> cancel_order: id chaining
    eps = [b.episode(f"shop/look#{i}", b.transcript(), b.verdict(), lookup) for i in range(failing)]
    good = b.transcript([b.call("get_order", {"order_id": "O-1"})])
    eps += [b.episode(f"shop/chain#{i}", good, b.verdict(True), chain) for i in range(passing)]
    return eps


def test_a_motif_failing_everywhere_ranks_first_with_its_figures(b: SimpleNamespace) -> None:
    ev = build_evidence(1, _episodes(b, 5, 5), {"shop": b.SHOP})
    # The search answers from its result (an answer check, no write): aggregation comes with it.
    assert {g.motif for g in ev.motifs} == {"non_key_lookup", "aggregation", "id_chaining"}
    assert ev.episodes[0].motifs == ["non_key_lookup", "aggregation"]
    ranked = weak_motifs(ev)
    assert [w.motif for w in ranked] == ["aggregation", "non_key_lookup"]  # a tie: by name
    top = ranked[1]
    assert (top.attempts, top.passed, top.others_pass_rate, top.envs) == (5, 0, 1.0, ["shop"])
    assert top.pass_high < 0.5 and "0/5 passed" in top.evidence
    # The fallback's report carries the ranking and names the motif on the env's guideline.
    report = fallback_report(ev, reason="test")
    assert [w.motif for w in report.weak_motifs] == ["aggregation", "non_key_lookup"]
    assert report.guidelines[0].motif == "aggregation"


def test_one_failure_is_not_a_weak_motif(b: SimpleNamespace) -> None:
    ev = build_evidence(1, _episodes(b, 1, 1), {"shop": b.SHOP})
    assert weak_motifs(ev) == []  # 1 of 1 failed: the interval still reaches the others' rate
