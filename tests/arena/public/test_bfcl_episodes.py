"""BFCL entries played as BFCL's harness plays them, with scripted fake policies (no model): the
ground truth through Arena's episodes (all 800 entries, and in the sandbox), held-out functions
appearing at their turn, the per-turn step cap, output that does not decode, Hermes text calls,
long-context states and a failing model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.env.object_runtime import ObjectRunner
from arena.protocols import ModelError
from arena.public.bfcl.episode import NEW_TOOLS_MESSAGE, EpisodeLimits
from arena.public.bfcl.gold import GoldReplayPolicy
from arena.public.bfcl.model import load_benchmark
from arena.public.bfcl.run import EntryResult, play
from arena.types import Completion, Message
from ops.cli import main


class ScriptedRecordingPolicy(GoldReplayPolicy):
    """The ground-truth replay (scripted, not a model) that records what each request showed."""

    def __init__(self, entry: Any) -> None:
        super().__init__(entry)
        self.requests: list[tuple[list[str], list[Message]]] = []

    async def chat(self, messages: list[Message], *, tools: Any = None, params: Any = None) -> Completion:
        self.requests.append(([t.name for t in tools or []], list(messages)))
        return await super().chat(messages, tools=tools, params=params)


class ScriptedTextPolicy:
    """Answers each request with the next of fixed texts (scripted, not a model); then plain text."""

    name = "scripted-text"

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.calls = 0

    async def chat(self, messages: list[Message], *, tools: Any = None, params: Any = None) -> Completion:
        self.calls += 1
        if self.texts and self.texts[0] == "raise":
            raise ModelError("the server is down")
        return Completion(text=self.texts.pop(0) if self.texts else "Done.")


def played(bfcl: Any, entry_id: str, policy: Any, **limits: Any) -> EntryResult:
    runner = ObjectRunner(bfcl.backend(), "bfcl")
    return anyio.run(lambda: play(policy, bfcl, bfcl.entry(entry_id), runner, EpisodeLimits(**limits)))


def test_the_ground_truth_through_arenas_episodes_passes_all_800(
    bfcl_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "bfcl", "--dir", str(bfcl_folder), "--gold", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "gold" and doc["sandboxed"] is False and doc["errors"] == {}
    assert doc["overall"]["passed"] == doc["overall"]["n"] == 800
    assert {c: s["passed"] for c, s in doc["categories"].items()} == {
        "base": 200,
        "miss_func": 200,
        "miss_param": 200,
        "long_context": 200,
    }


def test_in_the_sandbox_too(
    bfcl_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARENA_SANDBOX", "all")
    argv = ["bench", "bfcl", "--dir", str(bfcl_folder), "--gold", "--limit", "3", "--seed", "5", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sandboxed"] is True and doc["overall"]["passed"] == doc["overall"]["n"] == 12
    bench = load_benchmark(bfcl_folder)
    classes = {c for v in doc["verdicts"] for c in bench.entry(v["entry_id"]).involved_classes}
    assert len(classes) >= 4


def test_a_held_out_function_appears_at_its_turn_with_a_message_saying_so(bfcl: Any) -> None:
    entry = bfcl.entry("multi_turn_miss_func_0")
    policy = ScriptedRecordingPolicy(entry)
    result = played(bfcl, entry.id, policy)
    assert result.verdict.passed
    shown = {sum(1 for m in msgs if m.role == "user") - 1: names for names, msgs in policy.requests}
    assert all("sort" not in shown[t] for t in range(3)) and "sort" in shown[3]
    holdout = [m for m in policy.requests[-1][1] if m.role == "user"][3]
    assert holdout.content == NEW_TOOLS_MESSAGE


def test_the_step_cap_ends_the_entry_and_it_fails_force_terminated(bfcl: Any) -> None:
    call = '<tool_call>{"name": "ls", "arguments": {}}</tool_call>'
    policy = ScriptedTextPolicy(*[call] * 50)
    result = played(bfcl, "multi_turn_base_0", policy, max_steps_per_turn=3)
    assert result.run is not None and result.run.finish == "force_terminated"
    assert result.run.decoded == [[["ls()"]] * 4] and policy.calls == 4  # the later turns never ran
    assert (result.verdict.passed, result.verdict.error_type) == (False, "force_terminated")


def test_output_that_does_not_decode_ends_the_turn_and_runs_nothing(bfcl: Any) -> None:
    good = '<tool_call>{"name": "cd", "arguments": {"folder": "document"}}</tool_call>'
    bad = '<tool_call>{"name": "mkdir", "arguments": {"dir_name": "temp"}</tool_call>'  # JSON cut short
    result = played(bfcl, "multi_turn_base_0", ScriptedTextPolicy(good, bad + good))
    assert result.run is not None
    assert result.run.decoded[0] == [["cd(folder='document')"]]  # Hermes text calls, decoded
    assert result.run.steps[0][1].malformed and not result.run.steps[0][1].calls
    assert result.run.decoded[1:] == [[], [], []]  # the next turns were played: plain answers
    assert result.verdict.error_type == "state_mismatch"  # turn 0 without mkdir and mv


def test_long_context_entries_load_the_long_states(bfcl: Any) -> None:
    long_entry = bfcl.entry("multi_turn_long_context_0")
    base = bfcl.entry("multi_turn_base_0")
    runner = ObjectRunner(bfcl.backend(), "bfcl")

    async def sizes() -> tuple[int, int]:
        plain = runner.session(
            base.involved_classes, base.initial_config, {"long_context": base.long_context}
        )
        long = runner.session(
            long_entry.involved_classes, long_entry.initial_config, {"long_context": long_entry.long_context}
        )
        return len(json.dumps(await plain.snapshot())), len(json.dumps(await long.snapshot()))

    plain, long = anyio.run(sizes)
    assert long_entry.long_context and not base.long_context and long > 2 * plain


def test_a_failing_model_fails_the_entry_as_an_inference_error(bfcl: Any) -> None:
    result = played(bfcl, "multi_turn_base_0", ScriptedTextPolicy("raise"))
    assert result.run is not None and result.run.finish == "model_error"
    assert (result.verdict.error_type, result.verdict.bfcl_error_type) == (
        "inference_error",
        "multi_turn:inference_error",
    )


@pytest.mark.model
@pytest.mark.slow
def test_the_embedded_model_plays_an_entry_through_the_bench(
    bfcl_folder: Path, embedded_model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real policy path: BFCL's tool schemas through the chat template, greedy steps, a verdict."""
    # One turn, one class (the smallest prompt); at most two steps with calls.
    argv = [
        "bench",
        "bfcl",
        "--dir",
        str(bfcl_folder),
        "--entries",
        "multi_turn_base_50",
        "--max-tokens",
        "16",
    ]
    assert main([*argv, "--max-steps", "1", "--model", str(embedded_model_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == f"policy:local:{embedded_model_path}" and doc["entries"] == 1
    [v] = doc["verdicts"]
    assert v["entry_id"] == "multi_turn_base_50" and v["finish"] in ("completed", "force_terminated")
    assert v["passed"] is (v["error_type"] is None) and v["seconds"] > 0


def test_calls_that_break_a_sandbox_limit_fail_the_entry_not_the_run(bfcl: Any) -> None:
    """BFCL's square root sets the decimal precision it is given: a policy can ask for 10^8 digits."""
    from arena.sandbox import SandboxLimits, SandboxPool

    huge = (
        '<tool_call>{"name": "square_root", "arguments": {"number": 2, "precision": 100000000}}</tool_call>'
    )

    async def main() -> EntryResult:
        async with SandboxPool(SandboxLimits(cpu_seconds=1, wall_timeout_s=5), workers=1) as pool:
            runner = ObjectRunner(bfcl.backend(), "bfcl", pool)
            return await play(ScriptedTextPolicy(huge), bfcl, bfcl.entry("multi_turn_base_15"), runner)

    result = anyio.run(main)
    assert result.run is not None and result.run.finish == "env_error" and "cpu" in result.run.detail
    assert (result.verdict.passed, result.verdict.error_type, result.verdict.bfcl_error_type) == (
        False,
        "execution_limit",
        None,
    )
