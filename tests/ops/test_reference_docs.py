"""docs/configuration.md and docs/metrics.md are what the settings models and the registry say."""

from __future__ import annotations

import re

import pytest

from ops import reference_docs
from ops.config import ArenaConfig
from ops.metrics import Metrics


def test_the_references_are_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert reference_docs.main(["--check"]) == 0, capsys.readouterr().err


def test_every_setting_has_a_row_with_its_default_variable_and_description() -> None:
    rows = {
        m.group(1): (m.group(2), m.group(3), m.group(4))
        for m in re.finditer(
            r"^\| `([a-z0-9_.]+)` \| ([^|]*) \| `([A-Z0-9_]+)` \| (.*) \|$",
            reference_docs.CONFIGURATION.read_text(),
            re.M,
        )
    }
    keys = dict(reference_docs.settings(ArenaConfig))
    assert sorted(rows) == sorted(keys)
    assert rows["store.url"][1] == "ARENA_DATABASE_URL"  # a fixed name
    assert rows["models.policy.backend"][1] == "ARENA_MODELS__POLICY__BACKEND"
    assert rows["round.max_turns"][0] == "`10`" and rows["trainer.warmup_max_tasks"][0] == "—"
    store = {k: f for k, f in keys.items() if k.startswith("store.keep_")}
    assert len(store) == 6
    for key, field in store.items():
        assert rows[key][2] == field.description, key


def test_every_metric_has_a_row_and_a_drifted_one_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    text = reference_docs.METRICS.read_text()
    names = set(re.findall(r"^\| `(arena_[a-z_]+)` \|", text, re.M))
    registered = {
        m.name for m in Metrics().registry.collect() if m.name.startswith("arena_")
    }  # counters' family names drop `_total`
    assert {n.removesuffix("_total") for n in names} == registered
    original = reference_docs.metrics_markdown

    def drifted() -> str:
        return original().replace("| Rounds completed. |", "| Rounds done. |")

    monkeypatch.setattr(reference_docs, "metrics_markdown", drifted)
    assert reference_docs.main(["--check"]) == 1
