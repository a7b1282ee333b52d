"""The rubric judge on the real embedded model (local backend, grammar-constrained JSON)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.tasks.judge import judge_rubric
from arena.tasks.model import RubricCheck

pytestmark = [pytest.mark.anyio, pytest.mark.model]


async def test_embedded_model_judges_a_rubric(embedded_model_path: Path) -> None:
    from simulate.local import LocalChatModel

    judge = LocalChatModel.load(embedded_model_path, device="cpu", role="judge")
    check = RubricCheck(criteria=["The agent tells the user the balance of the checking account."])
    transcript = (
        'USER: "How much is in my checking account?"\n'
        "AGENT calls list_accounts({})\n"
        'TOOL list_accounts -> [{"account_id": "ACC-1", "nickname": "checking", "balance": 1200.5}]\n'
        'AGENT: "Your checking account holds $1,200.50."'
    )
    result = await judge_rubric(
        judge, check, intent="Know the checking balance", transcript_text=transcript, attempts=1
    )
    # A 135M model's judgement is not reliable, but with the schema constraint its answer must
    # always validate on the first attempt: a verdict either way, never "no valid verdict".
    assert result.kind == "rubric"
    assert result.detail == "all 1 criteria met" or result.detail.startswith("not met: The agent tells")
