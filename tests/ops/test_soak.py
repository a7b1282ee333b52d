"""`arena bench soak`: the real daemon with stand-in phases, a few rounds, measured round by round."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from ops.cli import main
from ops.soak import SoakReport, slope, summarize, warmup_rounds
from ops.soak_phases import StandInWork


def test_a_short_soak_measures_every_round_and_finds_no_orphan(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["bench", "soak", "--json", "--rounds", "4", "--keep-rounds", "1", "--tasks", "2", "--samples", "1"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"], report
    samples = report["samples"]
    assert [s["round"] for s in samples] == [1, 2, 3, 4]
    for s in samples:
        assert s["rss_bytes"] > 0 and s["open_fds"] > 0 and s["threads"] >= 1 and s["metric_series"] > 0
        assert s["orphans"] == 0 and s["integrity_problems"] == []
        assert s["store_bytes"] > 0 and s["data_dir_bytes"] > 0
    # Retention at 1 round: the store keeps one round of episodes and stand-in tasks whatever the
    # length of the run, and one checkpoint folder (64 KiB) in the data directory.
    assert [s["rows"]["episodes"] for s in samples] == [2, 2, 2, 2]
    assert [s["rows"]["tasks"] for s in samples] == [2, 2, 2, 2]
    assert samples[-1]["rows"]["yardstick_runs"] == 8  # round 1's (the first) and the last
    # ... and one round's records: the round, its six phases, its diagnosis, its checkpoint.
    for table, rows in {"rounds": 1, "phases": 6, "diagnosis_reports": 1, "checkpoints": 1}.items():
        assert [s["rows"][table] for s in samples] == [rows] * 4, table
    assert 64 * 1024 < samples[-1]["data_dir_bytes"] < 2 * 64 * 1024
    assert report["orphans_during"] == report["orphans_after"] == 0 and report["children_after"] == 0
    assert set(report["growth_per_round"]) >= {"rss_bytes", "open_fds", "threads", "store_bytes"}


def test_faults_and_admin_load_lose_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    args = shlex.split(
        "--rounds 3 --keep-rounds 1 --tasks 2 --samples 2 --kill-worker-every 2 --enospc-every 2"
    )
    load = ["--admin-load", "20", "--admin-load-seconds", "0.5", "--admin-load-from", "1"]
    code = main(["bench", "soak", "--json", *args, *load])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"], report
    assert list(report["worker_kills"]) == ["2"]  # killed in round 2's EVALUATE, mid-call
    killed_round = report["samples"][1]
    assert killed_round["episodes"] == 4 and killed_round["errored_episodes"] >= 1
    assert report["episodes_lost"] == report["episodes_duplicated"] == 0
    # Round 2's checkpoint save hit a full disk half-way: TRAIN failed once, the daemon retried it
    # by itself, and PUBLISH loaded only whole checkpoints.
    assert report["disk"]["injected"] == [2] and report["disk"]["half_written_loaded"] == 0
    assert report["phase_failures"] == {"train": 1}
    assert report["orphans_during"] == report["orphans_after"] == 0
    endpoints = report["admin_load"]["endpoints"]
    assert 1 <= sum(e["requests"] for e in endpoints.values()) <= 10  # bounded in count and time
    assert all(e["errors"] == 0 for e in endpoints.values())


def test_growth_is_the_slope_after_the_warmup() -> None:
    def sample(r: int, rss: int, store: int) -> dict[str, object]:
        return {
            "round": r,
            "seconds": 0.1,
            "rss_bytes": rss,
            "open_fds": 10,
            "threads": 4,
            "children": 0,
            "orphans": 0,
            "store_bytes": store,
            "rows": {},
            "data_dir_bytes": 0,
            "metric_series": 100,
            "episodes": 12,  # StandInWork(): 6 tasks x 2 samples
        }

    samples = [sample(r, 1000 + (500 if r <= 2 else r), 100 * min(r, 3)) for r in range(1, 9)]
    report = summarize(
        SoakReport.model_validate(
            {
                "rounds": 8,
                "warmup": 2,
                "store": "sqlite",
                "retention": {"episode_rounds": 2, "task_rounds": 2},
                "work": StandInWork(),
                "samples": samples,
            }
        )
    )
    assert report.growth_per_round["rss_bytes"] == 1.0 and report.growth_per_round["open_fds"] == 0
    assert report.store_bytes_per_round_before_retention == 100.0
    assert report.store_bytes_per_round_after_retention == 0.0
    assert report.rss_growth_pct == pytest.approx(100 * 5 / 1003, abs=0.01)
    assert report.ok
    assert slope([(1, 2.0)]) == 0.0


def test_the_warmup_defaults_to_a_sixth_and_leaves_two_rounds_measured() -> None:
    assert warmup_rounds(12, None) == 2 and warmup_rounds(12, 5) == 5
    assert warmup_rounds(4, 3) == 2 and warmup_rounds(1, None) == 0


def test_a_model_server_killed_mid_phase_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    args = shlex.split("--rounds 3 --keep-rounds 1 --tasks 2 --samples 2 --kill-model-every 2")
    code = main(["bench", "soak", "--json", *args])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"], report
    model = report["model_server"]
    assert list(model["kills"]) == ["2"]  # SIGKILLed with a call in flight, started again
    assert model["calls"] == 3 * 4 and 0 <= model["failed_calls"] <= 2 * 4
    # Round 1 ran before any kill: every call answered.
    assert report["samples"][0]["errored_episodes"] == 0
    assert all(s["episodes"] == 4 for s in report["samples"])
    assert report["episodes_lost"] == report["episodes_duplicated"] == 0
    # The server is not the daemon's process: it leaves nothing behind, and is not counted.
    assert report["orphans_during"] == report["orphans_after"] == 0 and report["children_after"] == 0


def test_the_daemon_sigkilled_mid_round_and_restarted_loses_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = shlex.split(
        "--rounds 4 --keep-rounds 1 --tasks 2 --samples 2 --kill-daemon-every 2 --seed 3"
        " --kill-worker-every 3 --kill-model-every 3"
    )
    code = main(["bench", "soak", "--json", *args])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"], report
    assert sorted(report["daemon_kills"]["kills"]) == ["2", "4"]  # each a moment into its round
    # Every round done once: the rounds a kill cut short were finished by the restarted daemon
    # with their episodes neither lost nor run twice.
    assert [(s["round"], s["episodes"]) for s in report["samples"]] == [(r, 4) for r in (1, 2, 3, 4)]
    assert report["episodes_lost"] == report["episodes_duplicated"] == 0
    # Nothing the killed daemons started outlived them: sandboxes, nor their model servers.
    assert report["daemon_kills"]["orphans_after_kills"] == 0
    assert report["orphans_after"] == report["children_after"] == 0
    # The other faults ran inside the daemon's runs, and are counted over all of them.
    faults = report["daemon_kills"]["other_faults"]
    assert faults["worker_kill"] == faults["model_server_kill"] == [3]
    # The children's retention is the report's, and its growth figures are said to restart.
    assert report["retention"]["episode_rounds"] == report["retention"]["record_rounds"] == 1
    assert any("start again with each of the 2 daemons" in note for note in report["notes"])


def test_a_restarted_daemon_samples_the_round_a_kill_left_unsampled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed after its round committed but before the sample was written: the next daemon
    samples that round, so the supervisor still sees every round's episodes."""
    samples = tmp_path / "samples.jsonl"
    common = [
        "bench",
        "soak",
        "--json",
        "--tasks",
        "2",
        "--samples",
        "1",
        "--data-dir",
        str(tmp_path / "data"),
    ]
    common += ["--samples-file", str(samples)]
    assert main([*common, "--rounds", "2"]) == 0
    lines = samples.read_text().splitlines()
    samples.write_text(lines[0] + "\n")  # round 2's sample lost with its daemon
    assert main([*common, "--rounds", "3", "--resume"]) == 0
    capsys.readouterr()
    rounds = [json.loads(line)["round"] for line in samples.read_text().splitlines()]
    assert rounds == [1, 2, 3]
    assert all(json.loads(line)["episodes"] == 2 for line in samples.read_text().splitlines())


def test_a_supervised_soak_keeps_its_own_data_dir(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "soak", "--rounds", "2", "--kill-daemon-every", "2", "--data-dir", "/tmp/x"])
    assert code == 2 and "supervises its own daemon runs: drop --data-dir" in capsys.readouterr().err
