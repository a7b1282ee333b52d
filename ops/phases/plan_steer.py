"""PLAN's second half: how the diagnosis and the curriculum steer the round's training tasks.

Kept apart from `ops.phases.plan` (which folds outcomes into the curriculum) so that each stays
small; see that module's docstring for the steps. Everything returned is JSON, stored with the
phase output, and read back by SYNTHESIZE and `arena report`.
"""

from __future__ import annotations

from typing import Any

from ops.phases.base import PhaseContext
from ops.phases.common import top_category


def category_weakness(report: Any, envs: dict[str, Any], weak_threshold: float) -> dict[str, float]:
    """Per top-level category, the weakness a weak arena environment passes to its training siblings."""
    out: dict[str, float] = {}
    if report is None:
        return out
    top = max((w.score for w in report.weak_envs), default=0.0) or 1.0
    for w in report.weak_envs:
        if w.env not in envs or (w.pass_rate is not None and w.pass_rate >= weak_threshold):
            continue
        category = top_category(envs[w.env])
        out[category] = max(out.get(category, 0.0), min(1.0, w.score / top) or 0.5)
    return out


def steer_training(
    ctx: PhaseContext, report: Any, envs: dict[str, Any], trainable: list[str], state: Any
) -> dict[str, Any]:
    """Allocation, motif guidelines, difficulty spread and complexification for this round."""
    from curriculum.probes import spread
    from curriculum.sampling import EnvCandidate, allocate_tasks
    from diagnose.new_envs import new_env_requests
    from diagnose.transfer import complexify_candidates, motif_guidelines, plan_transfer
    from diagnose.wiring import weakness_from_report
    from ops.phases.new_envs import recently_failed_categories

    cur, syn = ctx.config.curriculum, ctx.config.synthesis
    # Motifs, spreads and new environments are about graph tasks: executable environments only.
    executable = [n for n in trainable if envs[n].kind == "executable"]
    transfer = plan_transfer(report, envs, executable, cur.weak_threshold)
    by_category = category_weakness(report, envs, cur.weak_threshold)
    named = weakness_from_report(report) if report is not None else {}
    candidates = []
    for n in trainable:
        category = top_category(envs[n])
        weakness = max(named.get(n, 0.0), by_category.get(category, 0.0), transfer.weakness.get(n, 0.0))
        candidates.append(EnvCandidate(name=n, kind=envs[n].kind, category=category, weakness=weakness))
    allocation = allocate_tasks(state, candidates, cur.tasks_per_round, cur, seed=ctx.seed)
    levels = {n: r.difficulty for n, r in state.envs.items()}
    guidelines = motif_guidelines(transfer, allocation.tasks, levels, envs, syn.tasks_per_weak_env)
    targeted = {g.env: g.n_tasks for g in guidelines}
    plain: dict[str, list[dict[str, Any]]] = {}
    simulated: dict[str, dict[str, Any]] = {}
    for n, total in sorted(allocation.tasks.items()):
        rest = int(total) - targeted.get(n, 0)
        record = state.envs.get(n)
        current = record.difficulty if record is not None else cur.initial
        if envs[n].kind == "simulated":
            # The TRUSTEE task generator writes them at the environment's current difficulty.
            if rest > 0:
                simulated[n] = {"difficulty": current.as_dict(), "n": rest}
            continue
        plain[n] = [{"difficulty": d.as_dict(), "n": k} for d, k in spread(current, rest, ctx.round) if k > 0]
    new_envs = new_env_requests(
        report,
        envs,
        executable,
        transfer,
        cur.weak_threshold,
        syn.new_envs_per_round,
        recently_failed_categories(ctx),
    )
    complexify: list[dict[str, Any]] = []
    if syn.complexify_db and syn.complexify_rows > 0:
        # Budgeted: one environment per round, `complexify_rows` new rows.
        complexify = [
            {"env": n, "why": why, "rows": syn.complexify_rows}
            for n, why in complexify_candidates(report, transfer, envs, executable)[:1]
        ]
    return {
        "candidates": [c.model_dump(mode="json") for c in candidates],
        "allocation": allocation.model_dump(mode="json"),
        "guidelines": [g.model_dump(mode="json") for g in guidelines],
        "transfer": transfer.model_dump(mode="json"),
        "spread": plain,
        "simulated": simulated,
        "complexify": complexify,
        "new_envs": [r.model_dump(mode="json") for r in new_envs],
        "budget": {
            "tasks_per_round": cur.tasks_per_round,
            "targeted": sum(targeted.values()),
            "tasks_per_weak_env": syn.tasks_per_weak_env,
        },
    }
