"""Starting the worker processes of a multi-process GRPO round with `accelerate launch`.

The launch configuration is generated from `TrainerConfig` (`accelerate_config`):

- `sharding = "fsdp"`: accelerate's FSDP2 with FULL_SHARD (parameters resharded after each
  forward, so weights, gradients and AdamW moments are each split over the processes), every
  decoder layer its own unit (`TRANSFORMER_BASED_WRAP` on the model's `_no_split_modules`), bf16
  mixed precision over the fp32 master weights, activation checkpointing by FSDP, and the full
  state dict gathered to rank 0 (on CPU) for checkpoints. FSDP runs on GPUs only: accelerate
  never shards on CPU (its MULTI_CPU mode is plain data parallel);
- `sharding = "none"`: one full replica per process (DDP); on a machine without GPUs the workers
  ask for CPU (`use_cpu`), which accelerate runs over gloo — how the tests run this path.

Both start through torchrun (accelerate's "MULTI_GPU" launcher), which starts the processes and
sets their ranks; the launcher's exit status is the workers'.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import structlog

import trainer
from trainer.config import TrainerConfig
from trainer.precision import use_bf16
from trainer.shard_protocol import ACCELERATE_FILE, LOG_FILE

log = structlog.get_logger(__name__)

REPO_ROOT = Path(trainer.__file__).resolve().parent.parent


class ShardError(RuntimeError):
    """The worker processes could not start or failed (the message ends with their log's tail)."""


def gpu_count() -> int:
    """CUDA devices this process sees."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_devices(config: TrainerConfig, gpus: int) -> None:
    """Refuse a plan the machine cannot run, naming what is missing."""
    if config.sharding == "fsdp" and gpus == 0:
        raise ShardError(
            "trainer.sharding = 'fsdp' needs GPUs: accelerate shards over CUDA devices only "
            "(on a CPU machine, processes > 1 runs data-parallel replicas with sharding = 'none')"
        )
    if gpus and config.processes > gpus:
        raise ShardError(f"trainer.processes = {config.processes}, but this machine has {gpus} GPUs")


def accelerate_config(config: TrainerConfig, *, gpus: int, port: int) -> dict[str, Any]:
    """accelerate's launch configuration (the JSON form of `accelerate config`'s file)."""
    bf16 = use_bf16(config.bf16, "cuda" if gpus else "cpu")
    base: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        # torchrun for both; FSDP below adds the sharding. On CPU the workers' `use_cpu` turns this
        # into accelerate's MULTI_CPU (gloo): its own CPU launcher needs mpirun for several processes.
        "distributed_type": "MULTI_GPU",
        "num_processes": config.processes,
        "num_machines": 1,
        "machine_rank": 0,
        "main_process_port": port,
        "rdzv_backend": "static",
        "same_network": True,
        "mixed_precision": "bf16" if bf16 else "no",
        "use_cpu": False,
        "downcast_bf16": "no",
        "debug": False,
    }
    if config.sharding == "fsdp":
        base["distributed_type"] = "FSDP"
        base["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_reshard_after_forward": True,  # FULL_SHARD (False would be SHARD_GRAD_OP)
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_state_dict_type": "FULL_STATE_DICT",
            "fsdp_offload_params": False,
            # Each rank loads the weights on CPU before they are sharded (host memory: the model in
            # fp32 per GPU); rank-0-only loading would need the model built after the process group.
            "fsdp_cpu_ram_efficient_loading": False,
            "fsdp_activation_checkpointing": config.gradient_checkpointing,
        }
    return base


def free_port() -> int:
    """A TCP port nobody listens on now (for torch.distributed's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch_command(job_file: Path, config_file: Path) -> list[str]:
    """The `accelerate launch` command line that runs `trainer.shard_worker` on the job."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(config_file),
        "-m",
        "trainer.shard_worker",
        str(job_file),
    ]


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


async def run_workers(job_dir: Path, job_file: Path, config: TrainerConfig, gpus: int) -> None:
    """Start the workers on `job_file` and wait for them; `ShardError` when they fail.

    They run in a session of their own, so that a cancelled call (the daemon shutting down)
    ends every process of the launch, not only the launcher.
    """
    config_file = job_dir / ACCELERATE_FILE
    config_file.write_text(json.dumps(accelerate_config(config, gpus=gpus, port=free_port()), indent=2))
    env = dict(os.environ)
    # The workers import this checkout's packages wherever the daemon was started from.
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p)
    env.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    log_file = job_dir / LOG_FILE
    command = launch_command(job_file, config_file)
    log.info(
        "shard.launch", processes=config.processes, sharding=config.sharding, gpus=gpus, log=str(log_file)
    )
    with log_file.open("ab") as out:
        process = await anyio.open_process(
            command, stdin=None, stdout=out, stderr=out, env=env, cwd=str(REPO_ROOT), start_new_session=True
        )
        try:
            code = await process.wait()
        finally:
            if process.returncode is None:
                with anyio.CancelScope(shield=True):
                    await _end(process)
    if code != 0:
        raise ShardError(
            f"the GRPO worker processes failed (exit {code}); {log_file}:\n{_log_tail(log_file)}"
        )


async def _end(process: Any) -> None:
    """SIGTERM to the launch's process group, SIGKILL after 30 s."""
    for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        with anyio.move_on_after(wait):
            await process.wait()
            return
