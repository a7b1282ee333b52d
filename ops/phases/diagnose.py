"""DIAGNOSE: the diagnosis agent's report on the round's evaluation episodes.

The helper model, with a sandboxed Python tool over the evidence tables and a budget from
`[diagnosis]`, writes a structured report (ranked weak environments, failure patterns, task
guidelines); whenever its report is invalid, over budget or the helper fails, `diagnose` falls
back to its deterministic statistical ranking. The report is stored with the phase's done mark.
"""

from __future__ import annotations

from typing import Any

import structlog
from sqlmodel.ext.asyncio.session import AsyncSession

from ops.phases.base import BasePhase, PhaseContext
from ops.phases.evaluate import difficulties
from ops.phases.runtime import load_envs, sandbox_pool

log = structlog.get_logger(__name__)


class DiagnosePhase(BasePhase):
    """Weak environments, failure patterns and synthesis guidelines."""

    name = "diagnose"

    async def run(self, ctx: PhaseContext) -> dict[str, Any]:
        from diagnose.agent import run_diagnosis
        from diagnose.evidence import EnvMeta, build_evidence
        from diagnose.wiring import load_episode_inputs

        cfg = ctx.config.diagnosis
        async with ctx.store.transaction() as s:
            episodes = await load_episode_inputs(s, ctx.round, purpose="eval")
        envs = load_envs(ctx)
        meta = {name: EnvMeta.from_environment(env) for name, env in envs.items()}
        evidence = build_evidence(ctx.round, episodes, meta)
        levels = await difficulties(ctx)
        helper = await ctx.models.helper() if cfg.agent and episodes else None
        await ctx.safe_point()
        ctx.progress(0, 1, "diagnosis agent" if helper is not None else "statistical ranking")
        async with sandbox_pool(ctx, needed=helper is not None and cfg.sandbox) as pool:
            report = await run_diagnosis(
                evidence,
                episodes,
                helper=helper,
                sandbox=pool,
                config=cfg,
                difficulties={e.env: levels[e.env] for e in episodes},
                n_tasks=max(1, ctx.config.synthesis.tasks_per_weak_env),
            )
        ctx.progress(1, 1)
        log.info(
            "diagnosis.report",
            source=report.source,
            weak=report.weak,
            reason=(report.fallback_reason or "")[:200],
            calls=report.usage.calls,
        )
        return {
            "source": report.source,
            "fallback_reason": report.fallback_reason,
            "weak": report.weak,
            "episodes": len(episodes),
            "report": report.model_dump(mode="json"),
        }

    async def persist(self, session: AsyncSession, ctx: PhaseContext, output: dict[str, Any]) -> None:
        """Store the report with the phase's done mark and publish the weak-environment count."""
        from diagnose.report import DiagnosisReport
        from diagnose.wiring import save_report

        await save_report(session, DiagnosisReport.model_validate(output["report"]))
        ctx.metrics.weak_envs.set(len(output["weak"]))
