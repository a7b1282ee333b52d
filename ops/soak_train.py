"""Stand-in TRAIN and PUBLISH for `arena bench soak`, with a full disk on schedule.

TRAIN saves its checkpoint with the trainer's own atomic `trainer.checkpoints.save_checkpoint`
(written under a temporary name, renamed into place); only the model and tokenizer are
stand-ins (`StandInModel`, `StandInTokenizer`), whose `save_pretrained` write `checkpoint_kb` of
bytes. With `enospc_every`, the first attempt of every N-th round's save fails half-way with
`OSError(ENOSPC)` raised where the bytes are written, as a full data directory would: the
phase fails, the daemon retries it by itself, and PUBLISH checks every byte of what it publishes
(`half_written_loaded` counts any checkpoint that was not whole).
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import Any, ClassVar

import anyio
from pydantic import BaseModel, Field
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import CheckpointRow, repo
from ops.phases.base import BasePhase, PhaseContext, PhaseOutput
from ops.phases.runtime import checkpoints_dir, prune_round_dirs, round_dir

WEIGHTS = "model.safetensors"


class DiskFaults(BaseModel):
    """The full-disk schedule and what came of it."""

    enospc_every: int = Field(
        0, ge=0, description="Fail the first checkpoint save of every N-th round (0: never)."
    )
    injected: list[int] = Field(default_factory=list, description="Rounds whose save hit ENOSPC.")
    half_written_loaded: int = 0


def weights_bytes(round_no: int, kb: int) -> bytes:
    """The stand-in weights of a round (what PUBLISH expects to read back)."""
    return hashlib.sha256(str(round_no).encode()).digest() * 32 * kb


class StandInModel:
    """A stand-in for a model's `save_pretrained`: writes the round's bytes, maybe onto a full disk."""

    def __init__(self, data: bytes, *, fail_half_way: bool) -> None:
        self.data = data
        self.fail_half_way = fail_half_way

    def save_pretrained(self, path: str, **_: Any) -> None:
        """Write the weights in 4 KiB chunks; on a full disk, fail after half of them."""
        fd = os.open(Path(path) / WEIGHTS, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for start in range(0, len(self.data), 1 << 12):
                if self.fail_half_way and start >= len(self.data) // 2:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.write(fd, self.data[start : start + (1 << 12)])
            os.fsync(fd)
        finally:
            os.close(fd)


class StandInTokenizer:
    """A stand-in for a tokenizer's `save_pretrained`."""

    def save_pretrained(self, path: str, **_: Any) -> None:
        """Write a small tokenizer file."""
        (Path(path) / "tokenizer.json").write_text('{"standin": true}')


class StandInTrainOutput(PhaseOutput):
    """The stand-in TRAIN's output, as the stand-in PUBLISH reads it."""

    phase: ClassVar[str] = "train"

    checkpoint: str = Field(description="The checkpoint row's id (`round-NNNN`).")
    path: str = Field(description="The folder the trainer's atomic save wrote.")


class StandInTrain(BasePhase):
    """TRAIN's shape: one checkpoint saved by the trainer's atomic save, and its row."""

    name = "train"

    def __init__(self, checkpoint_kb: int, faults: DiskFaults) -> None:
        self.checkpoint_kb = checkpoint_kb
        self.faults = faults

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        from trainer.checkpoints import Lineage, save_checkpoint

        every = self.faults.enospc_every
        fail = bool(every) and ctx.round % every == 0 and ctx.round not in self.faults.injected
        if fail:
            self.faults.injected.append(ctx.round)
        model = StandInModel(weights_bytes(ctx.round, self.checkpoint_kb), fail_half_way=fail)
        lineage = Lineage(parent=None, round_id=ctx.round, phase="grpo", step=1, total_steps=1)
        folder = await anyio.to_thread.run_sync(
            lambda: save_checkpoint(model, StandInTokenizer(), round_dir(ctx), lineage)
        )
        return StandInTrainOutput(checkpoint=f"round-{ctx.round:04d}", path=str(folder)).stored()

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        row = CheckpointRow(id=output["checkpoint"], round=ctx.round, path=output["path"])
        await repo.add_checkpoint(session, row)


class StandInPublish(BasePhase):
    """PUBLISH's shape: load the round's checkpoint (every byte checked), make it live, prune."""

    name = "publish"

    def __init__(self, checkpoint_kb: int, faults: DiskFaults) -> None:
        self.checkpoint_kb = checkpoint_kb
        self.faults = faults

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        trained = ctx.require_output(StandInTrainOutput)
        folder = Path(trained.path)
        loaded = await anyio.to_thread.run_sync((folder / WEIGHTS).read_bytes)
        if loaded != weights_bytes(ctx.round, self.checkpoint_kb):
            self.faults.half_written_loaded += 1
            raise RuntimeError(f"checkpoint {folder} is not whole ({len(loaded)} bytes)")
        keep = ctx.config.trainer.keep_rounds
        pruned = await anyio.to_thread.run_sync(prune_round_dirs, checkpoints_dir(ctx), keep, [folder])
        ctx.metrics.publish_decisions.labels(decision="published").inc()
        return {"policy": trained.checkpoint, "pruned": len(pruned)}

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        trained = ctx.require_output(StandInTrainOutput)
        row = CheckpointRow(id=trained.checkpoint, round=ctx.round, path=trained.path, published=True)
        await repo.add_checkpoint(session, row)
