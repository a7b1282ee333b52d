"""`arena diagnose` and `arena curriculum show` through `ops.cli.main` on a SQLite store the test fills."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from arena.store import CurriculumStateRow, Store, repo
from curriculum.state import EnvCurriculum
from diagnose.evidence import build_evidence
from diagnose.fallback import fallback_report
from diagnose.wiring import save_report
from ops.cli import main


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'arena.db'}"
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARENA_DATABASE_URL", url)
    monkeypatch.delenv("ARENA_CONFIG", raising=False)
    return url


def _fill(url: str, b: SimpleNamespace) -> None:
    wrong = [
        b.call("get_order", {"order_id": "O-2"}),
        b.call("cancel_order", {"order_id": "O-2"}, writes=True),
    ]
    eps = [b.episode(f"shop/t1#{i}", b.transcript(wrong), b.verdict()) for i in range(4)]
    report = fallback_report(build_evidence(2, eps, {"shop": b.SHOP}), reason="no helper model configured")
    record = EnvCurriculum(env="shop", success_ema=0.25, episodes=8, successes=2, rounds=1)

    async def go() -> None:
        async with Store(url) as store:
            await store.migrate()
            async with store.transaction() as s:
                await save_report(s, report)
                await repo.upsert_curriculum(
                    s,
                    CurriculumStateRow(
                        env="shop",
                        difficulty=0.8,
                        budget=7,
                        round=2,
                        pass_history=[0.25],
                        data=record.model_dump(mode="json"),
                    ),
                )

    anyio.run(go)


def test_diagnose_and_curriculum_show(
    store_url: str, b: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(store_url, b)
    assert main(["diagnose", "--round", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["round"] == 2 and out["source"] == "fallback"
    assert out["fallback_reason"] == "no helper model configured"
    assert out["weak_envs"][0]["env"] == "shop" and out["guidelines"][0]["env"] == "shop"

    assert main(["diagnose"]) == 0  # newest round, human form
    text = capsys.readouterr().out
    assert "round 2: diagnosis by fallback" in text and "1. shop" in text and "wrong_entity" in text

    assert main(["curriculum", "show", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)["envs"]["shop"]
    assert state["budget"] == 7 and state["round"] == 2 and state["state"]["success_ema"] == 0.25
    assert main(["curriculum", "show"]) == 0
    assert "shop" in capsys.readouterr().out


def test_clear_errors(store_url: str, b: SimpleNamespace, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--round", "1"]) == 2
    assert "no store at" in capsys.readouterr().err
    _fill(store_url, b)
    assert main(["diagnose", "--round", "9"]) == 2
    assert "no diagnosis stored for round 9" in capsys.readouterr().err
    assert main(["diagnose", "--round", "0"]) == 2
    assert "--round must be 1 or more" in capsys.readouterr().err
