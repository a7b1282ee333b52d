"""`arena bench grpo`: the report has every field with positive numbers; bad input is one clear line.

No timing is asserted: the ratio is reported, not checked (CPU timings here depend on the load).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.cli import main


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["bench", "grpo", *argv]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    return captured.err


def test_bad_numbers_are_clear_errors(capsys: pytest.CaptureFixture[str], embedded_model_path: Path) -> None:
    model = ["--model", str(embedded_model_path)]
    assert "arena: error: --steps must be at least 1 (got 0)" in _error(capsys, "--steps", "0", *model)
    assert "--batch must be at least 2" in _error(capsys, "--batch", "1", *model)
    assert "--seq-len must be at least 16" in _error(capsys, "--seq-len", "8", *model)
    assert "--micro-batch (3) must divide --batch (4)" in _error(capsys, "--micro-batch", "3", *model)
    assert "--threads must be at least 1" in _error(capsys, "--threads", "0", *model)


def test_missing_or_wrong_model_folder_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    assert f"{missing}: no such model folder" in _error(capsys, "--model", str(missing))
    assert "is not a model folder (no config.json)" in _error(capsys, "--model", str(tmp_path))


def test_fixed_sequences_are_episode_shaped(embedded_model_path: Path) -> None:
    from transformers import AutoTokenizer

    from trainer.bench_sequences import POLICY_TURN, TOOL_RESULT, fixed_sequences

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_model_path))
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    seqs = fixed_sequences(tokenizer, batch=3, seq_len=300)
    assert len(seqs) == 3 and all(len(s.input_ids) == 300 for s in seqs)
    assert all(len(s.prompt_ids) == 75 and len(s.mask) == len(s.completion_ids) == 225 for s in seqs)
    mask = seqs[0].mask
    assert mask[:POLICY_TURN] == [1] * POLICY_TURN
    assert mask[POLICY_TURN : POLICY_TURN + TOOL_RESULT] == [0] * TOOL_RESULT
    assert seqs[0].completion_ids[POLICY_TURN - 1] == end and seqs[0].completion_ids[-1] == end
    assert seqs[0].input_ids != seqs[1].input_ids  # rows differ, shapes do not
    assert fixed_sequences(tokenizer, batch=3, seq_len=300) == seqs  # fixed: the same every run


@pytest.mark.model
def test_a_tiny_run_reports_every_field(
    capsys: pytest.CaptureFixture[str], embedded_model_path: Path
) -> None:
    argv = ["bench", "grpo", "--json", "--steps", "1", "--batch", "2", "--seq-len", "48"]
    assert main([*argv, "--model", str(embedded_model_path), "--no-gradient-checkpointing"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"sft", "grpo", "ratio", "median_ratio", "target", "settings", "device"}
    for name in ("sft", "grpo"):
        loop = report[name]
        for key in ("tokens_per_s", "total_tokens_per_s", "median_tokens_per_s", "seconds", "warmup_seconds"):
            assert loop[key] > 0, (name, key)
        assert loop["steps"] == 1 and len(loop["step_seconds"]) == 1
        # 48 tokens: a 12-token prompt, then a 32-token policy turn (trained) and 4 of a tool result.
        assert loop["tokens_per_step"] == 2 * 32 and loop["tokens"] == 64 and loop["total_tokens"] == 96
    assert report["grpo"]["rollout_seconds"] >= 0 and report["grpo"]["prepare_seconds"] >= 0
    assert report["ratio"] == pytest.approx(report["grpo"]["tokens_per_s"] / report["sft"]["tokens_per_s"])
    settings = report["settings"]
    assert settings["batch"] == 2 and settings["seq_len"] == 48 and settings["steps"] == 1
    assert settings["gradient_checkpointing"] is False and settings["lora"] is False
    assert settings["sft_micro_batch"] == settings["grpo_micro_batch"] == 1
    assert settings["order"].startswith("interleaved")
    assert report["device"].startswith(("cpu", "cuda"))
