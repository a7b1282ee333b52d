"""The diagnosis agent on the real embedded model: a valid report or a recorded fallback, never a crash."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from diagnose.agent import DiagnosisConfig, run_diagnosis
from diagnose.evidence import build_evidence
from diagnose.report import DiagnosisReport

pytestmark = [pytest.mark.anyio, pytest.mark.model]


async def test_embedded_model_diagnosis_is_valid_or_falls_back(
    b: SimpleNamespace, embedded_model_path: Path
) -> None:
    from simulate.local import LocalChatModel

    helper = LocalChatModel.load(embedded_model_path, device="cpu", role="helper")
    wrong = [
        b.call("get_order", {"order_id": "O-2"}),
        b.call("cancel_order", {"order_id": "O-2"}, writes=True),
    ]
    eps = [b.episode(f"shop/t1#{i}", b.transcript(wrong), b.verdict()) for i in range(3)]
    bank_task = b.task("bank", reference=[("list_accounts", {})], tid="b1")
    eps.append(
        b.episode(
            "bank/b1#0",
            b.transcript([b.call("list_accounts")], env="bank"),
            b.verdict(True),
            bank_task,
            "bank",
        )
    )
    evidence = build_evidence(1, eps, {"shop": b.SHOP, "bank": b.BANK})
    # A short budget: one constrained answer of at most 16 tokens (a shared CPU can make constrained
    # decoding crawl), which cannot hold a whole report: the agent's answer is cut short and rejected.
    config = DiagnosisConfig(max_calls=1, max_tokens_per_call=16, max_seconds=120, trace_tokens=200)
    report = await run_diagnosis(evidence, eps, helper=helper, config=config)
    DiagnosisReport.model_validate(report.model_dump(mode="json"))
    assert report.usage.calls == 1
    assert report.source == "fallback" and report.fallback_reason
    assert report.weak == ["shop"]  # the statistical ranking took over
