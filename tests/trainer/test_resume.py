"""A GRPO run killed (SIGKILL) after its first checkpoint resumes at the right step."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from trainer.checkpoints import list_checkpoints, read_lineage
from trainer.grpo import train_round
from trainer.metrics import TrainResult

from .tiny import letters_task, resume_config

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_killed_run_resumes_after_its_last_checkpoint(embedded_model_path: Path, tmp_path: Path) -> None:
    worker = Path(__file__).with_name("resume_worker.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, str(worker), str(embedded_model_path), str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 600
        while not list_checkpoints(tmp_path):
            if child.poll() is not None:
                pytest.fail(
                    f"the worker exited early: {child.stderr.read().decode()[-2000:] if child.stderr else ''}"
                )
            assert time.monotonic() < deadline, "no checkpoint within 10 minutes"
            time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert [lin.step for _, lin in list_checkpoints(tmp_path)] == [1], (
        "the worker got past step 1 before the kill"
    )

    def resume() -> TrainResult:
        return anyio.run(train_round, 0, [letters_task()], embedded_model_path, tmp_path, resume_config())

    before_kill = list_checkpoints(tmp_path)[0][1].train_seconds
    assert before_kill > 0

    result = resume()
    assert (result.resumed_from_step, result.steps, result.total_steps) == (1, 1, 2)
    assert [lin.step for _, lin in list_checkpoints(tmp_path)] == [1, 2]
    assert read_lineage(result.policy_dir).step == 2
    # The round's time goes on from the killed run's: the resumed call knows what came before it.
    assert result.prior_seconds == before_kill
    assert read_lineage(result.policy_dir).train_seconds > before_kill
    # Finished rounds are not trained again.
    again = resume()
    assert again.steps == 0 and again.policy_dir == result.policy_dir
    assert again.prior_seconds == read_lineage(result.policy_dir).train_seconds
