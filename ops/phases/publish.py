"""PUBLISH: point the policy model at the round's checkpoint and record its lineage.

Local policy backend: the daemon's own policy model loads the new safetensors
(`trainer.publish.LocalWeightPublisher`). HTTP (vLLM): the checkpoint is copied to
`trainer.publish_dir` (a folder the server reads) and the server reloads it
(`trainer.publish.HttpWeightPublisher`). The `checkpoints` row (parent, path, metrics) is written
with the phase's done mark; rerunning the phase after a crash publishes the same folder again.
Once the new weights are live, the checkpoint folders of all but the newest `trainer.keep_rounds`
rounds are deleted (never the live policy's, nor the one it was trained from).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
import structlog
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import CheckpointRow, repo
from ops.phases.base import BasePhase, PhaseContext
from ops.phases.runtime import checkpoints_dir, http_publisher, prune_round_dirs

log = structlog.get_logger(__name__)


def checkpoint_id(round_no: int) -> str:
    """The `checkpoints` row id of a round's published policy."""
    return f"round-{round_no:04d}"


class PublishPhase(BasePhase):
    """The new policy, live."""

    name = "publish"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        train = ctx.previous.get("train", {})
        checkpoint = train.get("checkpoint")
        out: dict[str, Any] = {
            "checkpoint": checkpoint,
            "parent": train.get("parent"),
            "pass_rates": ctx.previous.get("evaluate", {}).get("pass_rates", {}),
            "train": {k: train.get(k) for k in ("steps", "reward_mean", "pass_rate")},
        }
        if not checkpoint:
            return {**out, "policy": "unchanged"}
        await ctx.safe_point()
        ctx.progress(0, 1, "publishing weights")
        target = await self._publish(ctx, Path(checkpoint), int(train.get("steps") or 0))
        ctx.progress(1, 1)
        protect = [Path(checkpoint)] + ([Path(train["parent_dir"])] if train.get("parent_dir") else [])
        pruned = await anyio.to_thread.run_sync(
            prune_round_dirs, checkpoints_dir(ctx), ctx.config.trainer.keep_rounds, protect
        )
        if pruned:
            log.info("publish.pruned", rounds=[p.name for p in pruned], keep=ctx.config.trainer.keep_rounds)
        return {**out, "policy": "updated", "target": target, "pruned": [p.name for p in pruned]}

    async def _publish(self, ctx: PhaseContext, checkpoint: Path, step: int) -> str:
        from trainer.publish import LocalWeightPublisher

        if ctx.config.models.policy.backend == "http":
            publisher: Any = http_publisher(ctx)
            target = publisher.base_url
        else:
            publisher = LocalWeightPublisher(await ctx.models.policy())
            target = "local"
        await publisher.publish(checkpoint, round_id=ctx.round, step=step)
        ctx.models.policy_weights = checkpoint
        log.info("publish.done", checkpoint=str(checkpoint), target=target)
        return target

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        """Add the lineage row with the phase's done mark."""
        if output["checkpoint"]:
            await repo.add_checkpoint(
                session,
                CheckpointRow(
                    id=checkpoint_id(ctx.round),
                    round=ctx.round,
                    parent_id=output["parent"],
                    path=str(output["checkpoint"]),
                    published=True,
                    metrics={"pass_rates": output["pass_rates"], **output["train"]},
                ),
            )
            ctx.metrics.checkpoints.inc()
