"""`arena bench model`: levels, verdicts against llama.cpp and the concurrency target, the GRPO
rollout workload on the real embedded model, and the command end to end."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from arena.types import Completion, Message, SamplingParams
from ops.cli import main
from simulate.bench import EngineRun, LevelResult, run_level, verdicts
from simulate.bench_llamacpp import quantization, unavailable_reason


class ScriptedFixedLengthChat:
    """A scripted fake engine: every answer is `tokens` token ids after a short pause."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.prompts: list[str] = []

    async def chat(self, messages: list[Message], *, params: SamplingParams | None = None) -> Completion:
        self.prompts.append(messages[-1].content)
        await anyio.sleep(0.05)
        assert params is not None and params.temperature == 0.0
        return Completion(text="x", completion_token_ids=list(range(min(self.tokens, params.max_tokens))))


def _level(concurrency: int, tokens_per_s: float) -> LevelResult:
    return LevelResult(
        concurrency=concurrency,
        requests=concurrency,
        completion_tokens=64 * concurrency,
        wall_s=1.0,
        tokens_per_s=tokens_per_s,
        ms_per_token=10.0,
        latency_p50_s=1.0,
        latency_max_s=1.0,
    )


def test_a_level_sends_distinct_prompts_at_once_and_counts_their_tokens() -> None:
    engine = ScriptedFixedLengthChat(tokens=10)
    level = anyio.run(run_level, engine, 8, 6)
    assert len(set(engine.prompts)) == 8
    assert level.completion_tokens == 48 and level.requests == 8 and level.batches is None
    # Eight requests of 50 ms each, at once: the wall time is about one request's, not eight's.
    assert level.wall_s < 0.2 and level.tokens_per_s > 48 / 0.2
    assert level.ms_per_token == pytest.approx(1000 * level.latency_p50_s / 6, rel=0.05)


def test_verdicts_compare_the_best_arena_figures_with_llama_cpp_and_the_target() -> None:
    runs = [
        EngineRun(
            engine="arena", precision="float32", decode="fast", levels=[_level(1, 20.0), _level(32, 400.0)]
        ),
        EngineRun(
            engine="arena", precision="bfloat16", decode="fast", levels=[_level(1, 55.0), _level(32, 650.0)]
        ),
        EngineRun(engine="llama.cpp", precision="Q4_1", decode="llama.cpp", levels=[_level(1, 100.0)]),
    ]
    report = verdicts("m", "cpu", 64, runs, [], None)
    assert report.single_stream_share == 0.55 and report.single_stream_met
    assert report.concurrent_tokens_per_s == 650.0 and report.concurrent_met
    slower = verdicts("m", "cpu", 64, [runs[0], runs[2]], [], None)
    assert slower.single_stream_share == 0.2 and slower.single_stream_met is False
    assert slower.concurrent_met is False
    alone = verdicts("m", "cpu", 64, runs[:2], [], "llama-cpp-python is not installed")
    assert alone.single_stream_share is None and alone.single_stream_met is None
    assert alone.llama_cpp == "llama-cpp-python is not installed"


def test_llama_cpp_says_why_it_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import simulate.bench_llamacpp as module

    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: None)
    assert "not installed" in (unavailable_reason(tmp_path / "m.gguf") or "")
    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: object())
    assert "give --gguf" in (unavailable_reason(None) or "")
    assert "does not exist" in (unavailable_reason(tmp_path / "m.gguf") or "")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert unavailable_reason(tmp_path / "m.gguf") is None
    assert quantization(Path("SmolLM2-135M-Instruct.Q4_1.gguf")) == "Q4_1"
    assert quantization(Path("model.gguf")) == "model"


def test_rollouts_sample_groups_of_multi_turn_tool_episodes(local_model) -> None:
    from simulate.bench_rollouts import bench_rollouts

    run = anyio.run(
        lambda: bench_rollouts(local_model, "float32", groups=1, group_size=2, turns=2, turn_tokens=6)
    )
    assert run.episodes == 2 and run.turns == 2
    # The first prompt carries twelve tools, as a bundled environment's does.
    assert run.prompt_tokens > 500
    assert 0 < run.completion_tokens <= 2 * 2 * 6
    assert run.episodes_per_hour == pytest.approx(3600 * 2 / run.wall_s, rel=0.01)


def test_the_command_reports_each_precision_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "model", "--json", "--dtype", "float32", "--concurrency", "1,2", "--new-tokens", "4"]
    code = main([*argv, "--rollout-groups", "0", "--no-llama-cpp", "--transformers"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [(r["precision"], r["decode"]) for r in report["runs"]] == [
        ("float32", "fast"),
        ("float32", "transformers"),
    ]
    assert [lv["concurrency"] for lv in report["runs"][0]["levels"]] == [1, 2]
    assert all(lv["completion_tokens"] > 0 and lv["batches"] >= 1 for lv in report["runs"][0]["levels"])
    assert report["llama_cpp"] == "--no-llama-cpp" and report["single_stream_met"] is None
    assert report["concurrent_met"] is None  # no 32-request level ran


def test_the_command_refuses_a_missing_gguf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["bench", "model", "--gguf", str(tmp_path / "none.gguf")])
    assert code == 2 and "none.gguf: no such file" in capsys.readouterr().err


def test_precisions_name_what_auto_resolves_to() -> None:
    import argparse

    from ops.commands.model import _precisions
    from simulate.precision import cpu_has_bf16

    native = cpu_has_bf16()
    assert _precisions(argparse.Namespace(dtype="auto", device="cpu")) == [
        "bfloat16" if native else "float32"
    ]
    assert _precisions(argparse.Namespace(dtype="float32", device="cpu")) == ["float32"]
    both = ["float32", "bfloat16"] if native else ["float32"]
    assert _precisions(argparse.Namespace(dtype=None, device="cpu")) == both
