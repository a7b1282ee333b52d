"""PUBLISH: point the policy model at the round's checkpoint and record its lineage.

Local policy backend: the daemon's own policy model loads the new safetensors
(`trainer.publish.LocalWeightPublisher`). HTTP (vLLM): the checkpoint is copied to
`trainer.publish_dir` (a folder the server reads) and the server reloads it
(`trainer.publish.HttpWeightPublisher`). The `checkpoints` row (parent, path, metrics) is written
with the phase's done mark; rerunning the phase after a crash publishes the same folder again.
With `trainer.publish_gate`, the new weights are first measured on the yardstick (every tool,
greedy) and compared with this round's runs of the parent (EVALUATE's), task by task: a policy
whose paired change is worse beyond its 95% interval is held back (the parent is loaded again and stays the one the next round
trains), its row is kept unpublished, and either decision is an event (`publish.accepted`,
`publish.held_back`). With `public.publish_gate` the public yardstick (BFCL) gates the same way
once the yardstick let the policy pass. Once the new weights are live, the checkpoint folders of
all but the newest `trainer.keep_rounds` rounds are deleted (never the live policy's, nor the one
it was trained from).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
import structlog
from sqlmodel.ext.asyncio.session import AsyncSession

from arena.store import CheckpointRow, repo
from ops.phases.base import BasePhase, PhaseContext
from ops.phases.outputs import EvaluateOutput, TrainOutput
from ops.phases.public_scores import PublicYardstick
from ops.phases.public_scores import publish_metrics as publish_public_metrics
from ops.phases.runtime import checkpoints_dir, http_publisher, prune_round_dirs
from ops.phases.yardstick_scores import GateDecision, gate, publish_metrics

log = structlog.get_logger(__name__)


async def load_policy(ctx: PhaseContext, checkpoint: Path, step: int) -> str:
    """Make `checkpoint` the policy the daemon runs (its local model, or the HTTP policy server);
    returns where it went. PUBLISH makes a trained policy live with it, TRAIN measures a warm-up."""
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


def checkpoint_id(round_no: int) -> str:
    """The `checkpoints` row id of a round's published policy."""
    return f"round-{round_no:04d}"


class PublishPhase(BasePhase):
    """The new policy, live."""

    name = "publish"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        # Without TRAIN this round (a phase run on its own) nothing was trained: nothing to publish.
        train = ctx.output(TrainOutput) or TrainOutput(checkpoint=None, steps=0)
        evaluate = ctx.output(EvaluateOutput)
        checkpoint = train.checkpoint
        out: dict[str, Any] = {
            "checkpoint": checkpoint,
            "parent": train.parent,
            "pass_rates": evaluate.pass_rates if evaluate is not None else {},
            "train": {"steps": train.steps, "reward_mean": train.reward_mean, "pass_rate": train.pass_rate},
        }
        if not checkpoint:
            return {**out, "policy": "unchanged"}
        await ctx.safe_point()
        ctx.progress(0, 1, "publishing weights")
        target = await load_policy(ctx, Path(checkpoint), train.steps)
        ctx.progress(1, 1)
        decision, candidate = await self._gate(ctx)
        public_decision, public = await self._public_gate(ctx, decision)
        if not public_decision.publish:
            decision = decision.model_copy(update={"publish": False, "reason": public_decision.reason})
        if not decision.publish and train.parent_dir:
            # Held back: the parent goes live again, and stays the policy the next round trains.
            target = await load_policy(ctx, Path(train.parent_dir), 0)
        protect = [Path(checkpoint)] + ([Path(train.parent_dir)] if train.parent_dir else [])
        pruned = await anyio.to_thread.run_sync(
            prune_round_dirs, checkpoints_dir(ctx), ctx.config.trainer.keep_rounds, protect
        )
        if pruned:
            log.info("publish.pruned", rounds=[p.name for p in pruned], keep=ctx.config.trainer.keep_rounds)
        return {
            **out,
            "policy": "updated" if decision.publish else "held back",
            "target": target,
            "pruned": [p.name for p in pruned],
            "gate": decision.model_dump(mode="json"),
            "yardstick": candidate,
            "public_gate": public_decision.model_dump(mode="json"),
            "public_yardstick": public.model_dump(mode="json") if public else None,
        }

    async def _public_gate(
        self, ctx: PhaseContext, decision: GateDecision
    ) -> tuple[GateDecision, PublicYardstick | None]:
        """The public yardstick's say (`public.publish_gate`), once the yardstick let the policy pass."""
        from ops.phases.public_yardstick import gate_candidate

        if not ctx.config.trainer.publish_gate:
            return GateDecision(publish=True, reason="trainer.publish_gate is off"), None
        if not decision.publish:
            return GateDecision(publish=True, reason="not measured: the yardstick held the policy back"), None
        return await gate_candidate(ctx, checkpoint_id(ctx.round))

    async def _gate(self, ctx: PhaseContext) -> tuple[GateDecision, dict[str, Any] | None]:
        """The trained policy (already loaded) on the yardstick, against this round's parent runs."""
        from arena.store import repo_yardstick
        from ops.phases.runtime import load_envs, sandbox_pool
        from ops.phases.yardstick import ensure_drawn, measure

        enabled = ctx.config.trainer.publish_gate
        if not enabled:
            return gate([], [], enabled=False), None
        envs = load_envs(ctx)
        async with ctx.store.transaction() as s:
            parent_runs = await repo_yardstick.runs(s, ctx.round, "live")
        async with sandbox_pool(
            ctx, needed=any(envs[r.env].sandboxed for r in parent_runs if r.env in envs)
        ) as pool:
            tasks, levels = await ensure_drawn(ctx, envs, [], pool)
            wanted = {r.task_id for r in parent_runs}
            tasks = [t for t in tasks if t.full_id in wanted]
            if not tasks:
                return gate(parent_runs, [], enabled=True), None
            candidate = await measure(
                ctx, envs, tasks, levels, stage="candidate", policy=checkpoint_id(ctx.round), pool=pool
            )
        async with ctx.store.transaction() as s:
            candidate_runs = await repo_yardstick.runs(s, ctx.round, "candidate")
        decision = gate(parent_runs, candidate_runs, enabled=True)
        log.info("publish.gate", publish=decision.publish, reason=decision.reason)
        return decision, candidate

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        """Add the lineage row (published or held back) and the gate's decision with the done mark."""
        if not output["checkpoint"]:
            return
        published = output["policy"] == "updated"
        gate_out = output.get("gate") or {}
        await repo.add_checkpoint(
            session,
            CheckpointRow(
                id=checkpoint_id(ctx.round),
                round=ctx.round,
                parent_id=output["parent"],
                path=str(output["checkpoint"]),
                published=published,
                metrics={"pass_rates": output["pass_rates"], **output["train"], "gate": gate_out},
            ),
        )
        action = "publish.accepted" if published else "publish.held_back"
        detail = {
            "round": ctx.round,
            "checkpoint": checkpoint_id(ctx.round),
            "parent": output["parent"],
            **gate_out,
        }
        await repo.record_event(session, "publish_gate", action, detail)
        ctx.metrics.publish_decisions.labels(decision="published" if published else "held_back").inc()
        if published:
            ctx.metrics.checkpoints.inc()
            if output.get("yardstick"):
                # The live policy is now the candidate: its yardstick figures are the current ones.
                publish_metrics(ctx.metrics, output["yardstick"])
            publish_public_metrics(ctx.metrics, output.get("public_yardstick"))
