"""`arena run` and `arena config check` refuse the same files (issue 44): both load through
`ops.preflight.load_checked_config`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ops.cli import main

REPO = Path(__file__).resolve().parents[2]
GPU_8B = (REPO / "config" / "gpu-8b.toml").read_text()
# The full fine-tune case below edits this line: were it gone, the case would test an accepted file.
assert "lora.enabled = true" in GPU_8B

BAD_FILES = {
    # A bad key: the settings models refuse it.
    "unknown key": ("[round]\nsampels_per_task = 3\n", "round.sampels_per_task: unknown key"),
    "bad value": ("[round]\nmax_turns = 0\n", "round.max_turns"),
    # Refused by a validator of the daemon's settings over a lower package's section.
    "diagnosis too small for the report": (
        "[diagnosis]\nmax_tokens_per_call = 500\n",
        "diagnosis: max_tokens_per_call is 500; it must be at least 800",
    ),
    # An admin API on every interface without a token.
    "exposed admin": ('[admin]\naddress = "0.0.0.0:8787"\n', "without a token"),
    # A GPU plan whose weights, gradients and AdamW moments cannot fit trainer.gpu_memory_gb.
    "GPU plan too large": (
        GPU_8B.replace("lora.enabled = true", "lora.enabled = false"),
        "cannot fit the GPU: full fine-tune of 8.19B weights",
    ),
}


class _Daemon:
    """Stands in for `ops.daemon.Daemon`: a file both commands accept starts nothing here."""

    started: list[Any] = []

    def __init__(self, config: Any, **kwargs: Any) -> None:
        self.started.append(config)

    async def run(self) -> int:
        return 0


@pytest.fixture
def quiet_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARENA_ADMIN_TOKEN", raising=False)
    monkeypatch.delenv("ARENA_CONFIG", raising=False)
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_run_refuses_every_file_config_check_refuses(
    name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    quiet_env: None,
) -> None:
    import ops.daemon

    monkeypatch.setattr(ops.daemon, "Daemon", _Daemon)
    _Daemon.started = []
    text, message = BAD_FILES[name]
    file = tmp_path / "bad.toml"
    file.write_text(text)
    assert main(["config", "check", "--config", str(file)]) == 2
    from_check = capsys.readouterr().err
    assert main(["run", "--config", str(file), "--rounds", "1"]) == 2
    from_run = capsys.readouterr().err
    assert message in from_check and message in from_run
    assert from_check == from_run  # the same refusal, word for word
    assert _Daemon.started == []  # refused before a daemon was made


@pytest.mark.parametrize("example", ["gpu-8b.toml", "cpu-demo.toml"])
def test_run_accepts_what_config_check_accepts(
    example: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, quiet_env: None
) -> None:
    import ops.daemon
    import ops.logging

    monkeypatch.setattr(ops.daemon, "Daemon", _Daemon)
    monkeypatch.setattr(ops.logging, "configure_logging", lambda *a: None)  # leave the suite's logging be
    _Daemon.started = []
    file = REPO / "config" / example
    assert main(["config", "check", "--config", str(file)]) == 0
    assert "configuration OK" in capsys.readouterr().out
    assert main(["run", "--config", str(file), "--rounds", "1"]) == 0
    assert len(_Daemon.started) == 1
