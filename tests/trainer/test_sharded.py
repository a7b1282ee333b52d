"""Multi-process GRPO (`trainer.processes > 1`): the configuration, the accelerate launch plan, and a
real two-process round on CPU.

FSDP does not run on CPU (accelerate shards over CUDA devices only; its MULTI_CPU mode is data
parallel), so the round here runs the same launcher, worker and coordinator as two data-parallel
replicas over gloo; the FSDP launch plan is checked through accelerate's own launcher and plugin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ops.cli import main
from trainer.config import TrainerConfig
from trainer.shard_launch import ShardError, accelerate_config, check_devices

REPO = Path(__file__).resolve().parents[2]
HTTP = {"rollout_backend": "http", "rollout_base_url": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"sharding": "fsdp"}, "needs processes > 1"),
        ({"processes": 2}, "needs rollouts from the policy server"),
        ({"processes": 2, **HTTP, "lora": {"enabled": True}}, "LoRA trains on one GPU"),
        ({"processes": 4, **HTTP, "group_size": 4, "tasks_per_step": 1}, "over 4 processes"),
    ],
)
def test_process_combinations_that_cannot_run_are_refused(update: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TrainerConfig(**update)


def test_the_step_batch_is_split_over_the_processes() -> None:
    config = TrainerConfig(processes=2, **HTTP, group_size=4, tasks_per_step=2, micro_batch_size=2)
    # 8 completions a step: 2 per micro-batch, 2 micro-batches on each of the 2 processes.
    assert (config.batch_size, config.accumulation_steps) == (8, 2)
    assert TrainerConfig(group_size=4, tasks_per_step=2).accumulation_steps == 4


def test_fsdp_launch_plan_is_what_accelerate_runs_as_full_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env
    from torch.distributed.fsdp import StateDictType

    config = TrainerConfig(processes=8, sharding="fsdp", **HTTP, group_size=8, tasks_per_step=8, bf16=True)
    plan = tmp_path / "accelerate.json"
    plan.write_text(json.dumps(accelerate_config(config, gpus=8, port=29500)))
    parser = launch_command_parser()
    args, _, _ = _validate_launch_command(
        parser.parse_args(["--config_file", str(plan), "-m", "trainer.shard_worker", "job.json"])
    )
    assert args.use_fsdp and args.num_processes == 8 and args.mixed_precision == "bf16"
    env = prepare_multi_gpu_env(args)  # what the launcher gives every worker process
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()  # as the workers' Accelerator builds it from that environment
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True  # FULL_SHARD
    assert plugin.state_dict_type == StateDictType.FULL_STATE_DICT  # checkpoints gather to rank 0
    assert plugin.activation_checkpointing is True  # config.gradient_checkpointing, done by FSDP
    # Data parallel (sharding none) launches the same way, without the FSDP plugin.
    replicas = accelerate_config(config.model_copy(update={"sharding": "none"}), gpus=0, port=29500)
    assert replicas["distributed_type"] == "MULTI_GPU" and "fsdp_config" not in replicas


def test_fsdp_without_gpus_or_with_too_few_is_refused() -> None:
    config = TrainerConfig(processes=2, sharding="fsdp", **HTTP)
    with pytest.raises(ShardError, match="needs GPUs"):
        check_devices(config, gpus=0)
    with pytest.raises(ShardError, match="this machine has 1 GPUs"):
        check_devices(config, gpus=1)
    check_devices(config, gpus=2)
    check_devices(config.model_copy(update={"sharding": "none"}), gpus=0)  # replicas run on CPU


def test_config_check_accepts_a_full_8b_fine_tune_sharded_over_8_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = REPO / "config" / "gpu-8b-fsdp.toml"
    assert main(["config", "check", "--config", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "full fine-tune of 8.19B weights" in out and "FSDP full-shard over 8 GPUs, per GPU" in out
    # The same plan on one GPU is refused with its numbers.
    one = tmp_path / "one.toml"
    text = recipe.read_text()
    one.write_text(
        text.replace("processes = 8 ", "processes = 1 ").replace('sharding = "fsdp"', 'sharding = "none"')
    )
    assert main(["config", "check", "--config", str(one)]) == 2
    err = capsys.readouterr().err
    assert "cannot fit the GPU: full fine-tune of 8.19B weights" in err and "GB of 80 GB" in err
    # A batch that does not split over the GPUs, and LoRA with several processes, are refused too.
    uneven = tmp_path / "uneven.toml"
    uneven.write_text(text.replace("tasks_per_step = 8 ", "tasks_per_step = 5 "))
    assert main(["config", "check", "--config", str(uneven)]) == 2
    assert "over 8 processes" in capsys.readouterr().err
    lora = tmp_path / "lora.toml"
    lora.write_text(text.replace("lora.enabled = false", "lora.enabled = true"))
    assert main(["config", "check", "--config", str(lora)]) == 2
    assert "LoRA trains on one GPU" in capsys.readouterr().err


def test_unknown_sampler_logprobs_cross_to_the_workers_as_nan() -> None:
    import math

    from trainer.metrics import RolloutStats
    from trainer.shard_protocol import RolloutReply

    reply = RolloutReply(output={"logprobs": [[-0.5, math.nan]]}, stats=RolloutStats())
    back = RolloutReply.model_validate_json(reply.model_dump_json())
    assert back.output["logprobs"][0][0] == -0.5 and math.isnan(back.output["logprobs"][0][1])


class _Stop(Exception):
    """The daemon's stop, as its safe point raises it."""


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.anyio
async def test_two_processes_train_stop_at_a_step_and_resume(
    embedded_model_path: Path, tmp_path: Path
) -> None:
    """Two worker processes train each step on half the batch; a stop ends them after the step with
    its checkpoint, and the next call resumes from it. The checkpoints are the usual folders, which
    the policy server reloaded and `load_policy` loads."""
    import torch
    from safetensors.torch import load_file

    from simulate.local import LocalChatModel
    from simulate.serve import create_app, serving
    from trainer.checkpoints import list_checkpoints, load_policy
    from trainer.grpo import train_round
    from trainer.metrics import StepMetrics
    from trainer.publish import HttpWeightPublisher
    from trainer.shard_protocol import ShardResult

    from .test_http_rollouts import record_loads
    from .tiny import letters_task, tiny_config

    served = LocalChatModel.load(embedded_model_path, device="cpu", dtype="float32")
    loads = record_loads(served, "load_weights")
    seen: list[StepMetrics] = []
    out = tmp_path / "out"
    result_file = out / "shard" / "result.json"

    async def stop() -> None:
        raise _Stop

    async with serving(create_app(served, name="policy", allow_reload=True)) as url:
        publisher = HttpWeightPublisher(url, tmp_path / "shared")
        config = tiny_config(max_steps=2, processes=2, rollout_backend="http", rollout_base_url=url + "/v1")
        with pytest.raises(_Stop):
            await train_round(
                0, [letters_task()], embedded_model_path, out, config, seen.append, stop, publisher=publisher
            )
        stopped = ShardResult.model_validate_json(result_file.read_text())
        assert [lin.step for _, lin in list_checkpoints(out)] == [1]
        result = await train_round(
            0, [letters_task()], embedded_model_path, out, config, seen.append, publisher=publisher
        )
        resumed = ShardResult.model_validate_json(result_file.read_text())

    # Both ranks trained their half of each batch (4 completions a step: 2 each).
    for shard, steps in ((stopped, 1), (resumed, 1)):
        assert [(r.rank, r.world_size, r.distributed_type) for r in shard.ranks] == [
            (0, 2, "MULTI_CPU"),
            (1, 2, "MULTI_CPU"),
        ]
        assert [r.sequences for r in shard.ranks] == [2 * steps, 2 * steps] and shard.steps == steps
        assert len({r.pid for r in shard.ranks}) == 2
    assert stopped.stopped and not resumed.stopped
    assert (result.resumed_from_step, result.steps, result.total_steps, result.processes) == (1, 1, 2, 2)
    assert [m.step for m in seen] == [1, 2] and all(m.finite() and m.sync_kind == "full" for m in seen)
    assert [lin.step for _, lin in list_checkpoints(out)] == [1, 2]
    # The server reloaded the start, then each step's checkpoint (the resumed call republished step 1).
    assert [folder for _, folder in loads] == [
        "round-0000-step-000000",
        "round-0000-step-000001",
        "round-0000-step-000001",
        "round-0000-step-000002",
    ]
    # The final checkpoint is a plain model folder with the trained weights, and the served ones.
    model, _ = load_policy(result.policy_dir)
    final = load_file(str(result.policy_dir / "model.safetensors"))
    base = load_file(str(embedded_model_path / "model.safetensors"))
    assert set(final) == set(base)
    changed = [k for k in final if not torch.equal(final[k], base[k])]
    assert changed and all(torch.equal(model.state_dict()[k], final[k]) for k in changed)
    state = served._model.state_dict()
    assert all(torch.equal(state[k].cpu(), final[k]) for k in changed)
    assert (out / "shard" / "worker.log").stat().st_size > 0  # the workers' output, for failures
