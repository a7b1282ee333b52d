"""`arena bench learn` runs the daemon's own rounds: the same TRAIN and yardstick code, nothing apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from ops.learn_run import bench_config, read_report, render, run_rounds
from ops.models import ModelHub
from simulate.scripted_reference import ScriptedReferencePolicy

pytestmark = pytest.mark.anyio

TINY = Path(__file__).parent / "learn_tiny.toml"


async def test_the_bench_runs_the_daemons_train_and_yardstick_and_reports_by_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRAIN and the yardstick are spied on where the daemon's phases call them: the bench's
    rounds go through exactly those (TRAIN stands in, as training needs model weights)."""
    from ops.phases import yardstick
    from ops.phases.train import TrainPhase

    calls: list[tuple[str, Any]] = []

    async def train_spy(self: TrainPhase, ctx: Any) -> dict[str, Any]:
        calls.append(("train", ctx.round))
        return {"skipped": "spy", "steps": 0, "checkpoint": None}

    measure = yardstick.measure

    async def measure_spy(ctx: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(("yardstick", (ctx.round, kwargs["stage"])))
        return await measure(ctx, *args, **kwargs)

    monkeypatch.setattr(TrainPhase, "run", train_spy)
    monkeypatch.setattr(yardstick, "measure", measure_spy)
    config = bench_config(TINY, tmp_path / "run", seed=3)
    assert config.round.yardstick_after_warmup and config.daemon.seed == 3
    hub = ModelHub(config)
    policy = ScriptedReferencePolicy([])  # a scripted fake: no model, known (failing) answers
    hub._models = {"policy": policy, "helper": policy}
    with anyio.fail_after(600):
        assert await run_rounds(config, 2, models=hub) == 0
        # A rerun into the same folder runs nothing more: both rounds are done.
        assert await run_rounds(config, 2, models=hub) == 0
    assert [c for c in calls if c[0] == "train"] == [("train", 1), ("train", 2)]
    assert [c[1] for c in calls if c[0] == "yardstick"] == [(1, "live"), (2, "live")]
    report = await read_report(config, "learn_tiny.toml")
    assert [r.round for r in report.rounds] == [1, 2]
    first, second = report.rounds
    assert first.yardstick is not None and second.yardstick is not None
    assert (
        second.yardstick.since_first is not None
        and second.yardstick.since_first.tasks == first.yardstick.score.n
    )
    assert set(first.phase_seconds) == {"evaluate", "diagnose", "plan", "synthesize", "train", "publish"}
    text = "\n".join(render(report))
    assert "since round 1" in text and "round 2:" in text and "total" in text
    json.dumps(report.model_dump(mode="json"))


def test_arena_variables_override_the_file_but_not_what_the_bench_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant of a configuration runs without a file of its own (scripts/gpu-learn.sh does)."""
    monkeypatch.setenv("ARENA_TRAINER__TOOL_SUBSET", "5")
    monkeypatch.setenv("ARENA_DAEMON__SEED", "99")
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "elsewhere"))
    config = bench_config(TINY, tmp_path / "run", seed=3)
    assert config.trainer.tool_subset == 5
    assert config.daemon.seed == 3 and Path(config.data.dir) == tmp_path / "run"
