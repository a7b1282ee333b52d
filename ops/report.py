"""`arena report`'s records: one per round, read from what the phases stored.

Each record follows the round's chain: the yardstick, the public yardstick (BFCL) and the fresh
pass rates (EVALUATE), the weak environments, motifs and failure patterns (DIAGNOSE), what PLAN
did with them (budget, guidelines, difficulty decisions and their reasons), what SYNTHESIZE
produced (per environment, origin, motif and skill), the GRPO figures (TRAIN) and whether the
policy went live (PUBLISH).
Fields a phase does not store (an older round, or a phase not run yet) are left out or empty;
nothing here is required beyond the phase outputs themselves.

Disclosure: every figure measured with a tool subset (`trainer.tool_subset`: each task shows its
reference tools plus N distractors) carries `tool_view`; the yardstick always shows every tool.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from ops.yardstick_history import read_history


def tool_view(subset: int | None) -> str:
    """How many tools an episode was shown, in words."""
    if subset is None:
        return "every tool"
    return f"reference tools + {subset} distractor{'s' if subset != 1 else ''} (trainer.tool_subset)"


def _diagnosis(out: dict[str, Any]) -> dict[str, Any]:
    report = out.get("report") or {}
    return {
        "source": out.get("source"),
        "fallback_reason": out.get("fallback_reason"),
        "weak_envs": [
            {k: w.get(k) for k in ("env", "rank", "score", "pass_rate", "evidence")}
            for w in report.get("weak_envs", [])
        ],
        "weak_motifs": report.get("weak_motifs", []),
        "patterns": [
            {
                k: p.get(k)
                for k in ("env", "category", "motif", "description", "tools")
                if p.get(k) is not None
            }
            for p in report.get("patterns", [])
        ],
    }


# Curriculum decisions that leave an environment's difficulty as it was.
_HOLDS = ("hold", "insufficient")


def _plan(out: dict[str, Any]) -> dict[str, Any]:
    budget = {e: n for e, n in (out.get("allocation") or {}).get("tasks", {}).items() if n}
    keep = ("env", "failure_pattern", "skill", "motif", "target_tools", "n_tasks", "difficulty")
    extra = {k: out[k] for k in ("motifs", "skills", "motif_targets") if k in out}
    # Rounds stored before the rename keep the gate under its old name ("cheap_gate"): read both,
    # so the stored history needs no migration.
    gate = out.get("simulated_training_gate") or out.get("cheap_gate")
    if gate:
        # Whether simulated environments got training budget, and the measured evidence why.
        keys = ("open", "why", "helper", "false_pass", "agreement")
        extra["simulated_training_gate"] = {k: gate.get(k) for k in keys}
        extra["simulated"] = out.get("simulated", {})
    if out.get("new_envs"):
        extra["new_envs"] = [{k: r.get(k) for k in ("near", "why", "motifs")} for r in out["new_envs"]]
    return {
        "budget": budget,
        "guidelines": [
            {k: g[k] for k in keep if g.get(k) not in (None, "", [])} for g in out.get("guidelines", [])
        ],
        # What changed; the environments left as they were (too few episodes, inside the band) are
        # one count on a terminal, and each of them is in `holds`.
        "decisions": [d for d in out.get("decisions", []) if d.get("action") not in _HOLDS],
        "held": sum(1 for d in out.get("decisions", []) if d.get("action") in _HOLDS),
        "holds": [d for d in out.get("decisions", []) if d.get("action") in _HOLDS],
        **extra,
    }


def _synthesize(out: dict[str, Any]) -> dict[str, Any]:
    tasks = out.get("tasks", [])
    return {
        "tasks": len(tasks),
        "per_env": dict(Counter(t.get("env") for t in tasks)),
        "per_origin": dict(Counter(t.get("origin") for t in tasks)),
        "per_motif": dict(Counter(t["motif"] for t in tasks if t.get("motif"))),
        "per_skill": dict(Counter(t["skill"] for t in tasks if t.get("skill"))),
        # Motifs each task's reference exercises (targeted or not), where SYNTHESIZE records them.
        "exercises": dict(Counter(m for t in tasks for m in t.get("exercises") or [])),
        "complexified": out.get("complexified"),
        "new_envs": out.get("new_envs", []),
        "acceptance": out.get("acceptance"),
        "skipped": out.get("skipped"),
    }


def _train(out: dict[str, Any], subset: int | None) -> dict[str, Any]:
    grpo = out.get("grpo") or {}
    keys = (
        "groups",
        "episodes",
        "infra_errors",
        "zero_variance_groups",
        "resampled_groups",
        "chain_breaks",
        "seconds",
    )
    return {
        "skipped": out.get("skipped"),
        "steps": out.get("steps"),
        "reward_mean": out.get("reward_mean"),
        "pass_rate": out.get("pass_rate"),
        **{k: grpo.get(k) for k in keys if k in grpo},
        "sft": bool(out.get("sft")),
        "tool_view": tool_view(subset),
    }


def round_record(round_no: int, status: str, outputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One round's record from its phases' outputs (by phase name; missing phases give empty parts)."""
    ev = outputs.get("evaluate") or {}
    subset = ev.get("tool_subset")
    publish = outputs.get("publish") or {}
    record: dict[str, Any] = {
        "round": round_no,
        "status": status,
        "phases_done": sorted(outputs),
        "yardstick": ev.get("yardstick"),
        # BFCL multi-turn entries, scored by BFCL's rules (`ops.phases.public_yardstick`).
        "public_yardstick": ev.get("public_yardstick"),
        # τ²-bench retail and airline tasks, scored by τ²'s reward (`ops.phases.public_tau2`).
        "public_tau2": ev.get("public_tau2"),
        "fresh": {
            "pass_rates": ev.get("pass_rates", {}),
            "category_pass_rates": ev.get("category_pass_rates", {}),
            "difficulty": ev.get("difficulty", {}),
            "tool_view": tool_view(subset),
        },
    }
    if "diagnose" in outputs:
        record["diagnosis"] = _diagnosis(outputs["diagnose"])
    if "plan" in outputs:
        record["plan"] = _plan(outputs["plan"])
    if "synthesize" in outputs:
        record["synthesize"] = _synthesize(outputs["synthesize"])
    if "train" in outputs:
        record["train"] = _train(outputs["train"], subset)
    if "publish" in outputs:
        record["publish"] = {
            "policy": publish.get("policy"),
            "checkpoint": publish.get("checkpoint"),
            "gate": publish.get("gate"),
            "candidate_yardstick": publish.get("yardstick"),
            "public_gate": publish.get("public_gate"),
            "candidate_public_yardstick": publish.get("public_yardstick"),
        }
    return record


async def read_records(session: AsyncSession, first: int | None, last: int | None) -> list[dict[str, Any]]:
    """The records of the stored rounds from `first` to `last` (inclusive; None: open-ended)."""
    from sqlmodel import col, select

    from arena.store import PhaseRow, RoundRow

    stmt = select(RoundRow).order_by(col(RoundRow.round))
    if first is not None:
        stmt = stmt.where(col(RoundRow.round) >= first)
    if last is not None:
        stmt = stmt.where(col(RoundRow.round) <= last)
    rounds = list((await session.exec(stmt)).all())
    outputs: dict[int, dict[str, dict[str, Any]]] = {}
    for rnd in rounds:
        rows = (await session.exec(select(PhaseRow).where(PhaseRow.round == rnd.round))).all()
        outputs[rnd.round] = {r.phase: r.output for r in rows if r.status == "done"}
    # A warm-up round's candidate − live change is the warm-up's and GRPO's, not GRPO's alone.
    warmed_up = {n for n, out in outputs.items() if (out.get("train") or {}).get("sft")}
    history = {h.round: h for h in await read_history(session, warmed_up)}
    records = []
    for rnd in rounds:
        record = round_record(rnd.round, rnd.status, outputs[rnd.round])
        if rnd.round in history:
            # The changes paired over the same tasks, and every task's outcome to recompute them.
            record["yardstick_by_round"] = history[rnd.round].model_dump(mode="json")
        records.append(record)
    return records
