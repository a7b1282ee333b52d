"""`arena bench tau2 --gold` end to end on the toy domain (the import, tools and gold replay stood in)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from ops.cli import CliError, build_cli
from tests.arena.public.tau2.episode_fakes import TOOLS, ToyDomain, gold_store, make_task


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> ToyDomain:
    import arena.public.tau2.domains as domains
    import arena.public.tau2.episode as episode
    import arena.public.tau2.model as model

    domain = ToyDomain()
    tasks = [make_task(["DB", "ACTION", "COMMUNICATE"]), make_task(["DB", "NL_ASSERTION"])]
    tasks[1] = tasks[1].model_copy(update={"id": "t2"})
    domain.tasks = tasks  # type: ignore[attr-defined]
    monkeypatch.setattr(model, "load_domain", lambda data_dir, name: domain)
    monkeypatch.setattr(domains, "domain_tools", lambda name: TOOLS)
    monkeypatch.setattr(episode, "replay_gold", lambda d, task: SimpleNamespace(store=gold_store(d, task)))
    monkeypatch.setenv("ARENA_DATA_DIR", "/nonexistent-arena-data")
    return domain


def bench(*argv: str) -> Any:
    args = build_cli().parser.parse_args(["bench", "tau2", *argv])
    return args.func(args)


def test_gold_runs_every_task_through_the_episode_and_reports_it(
    toy: ToyDomain, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench("--gold", "--domain", "retail", "--samples", "2", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    retail = doc["domains"]["retail"]
    assert doc["mode"] == "gold" and doc["runs"] == 4
    assert retail["gold"] == {"passed": 4, "runs": 4, "failed": [], "nl_unchecked": ["t2"]}
    assert retail["terminations"] == {"user_stop": 4}
    assert set(retail["pass_hat_k"]) == {"1", "2"}
    assert retail["pass_1"]["n"] == 4
    first = retail["runs"][0]
    assert (first["task"], first["trial"], first["reward"], first["db"]) == ("t1", 0, 1.0, True)
    assert first["actions"] == [True] and first["communicate"] == [True]


def test_the_text_report_and_bad_options(toy: ToyDomain, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench("--gold", "--domain", "airline", "--tasks", "t1") == 0
    out = capsys.readouterr().out
    assert "airline" in out and "pass^1 1.00" in out and "gold: 1/1" in out
    with pytest.raises(CliError, match="unknown"):
        bench("--gold", "--domain", "telecom")
    with pytest.raises(CliError, match="no τ² tasks"):
        bench("--gold", "--tasks", "nope")
    with pytest.raises(CliError, match="at least 1"):
        bench("--gold", "--samples", "0")
