"""SYNTHESIZE's new environments: built in the daemon where PLAN found no training environment fits.

PLAN (`diagnose.new_envs`) asks for at most `synthesis.new_envs_per_round` environments, each a
theme near a weak arena environment. Each is built by the environment synthesis pipeline
(`arena.synth.envgen`: description, schema, seed, tools, tool tests, all checked in the sandbox)
on the helper model, in a staging folder, and moved under `DATA_DIR/envs` only when every step
passed and its name is new. It is then an ordinary synthesized (sandboxed) environment: training
only (EVALUATE keeps it out of the arena draw, so the held-out set and its yardstick stay as they
were), with targeted tasks for its weak motif from the same round on.

`DATA_DIR/envs/built.json` is the ledger: one record per attempt, keyed by round and the weak
environment, so a restarted phase neither builds twice nor retries at once; a category whose
attempt failed is left alone for `RETRY_AFTER_ROUNDS` rounds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import structlog
from pydantic import BaseModel, Field

from arena.env.registry import discover, env_dirs_in, env_name_of
from arena.store import repo
from diagnose.new_envs import NewEnvRequest
from ops.phases.base import PhaseContext
from ops.phases.runtime import grown_envs_dir, sandbox_pool

log = structlog.get_logger(__name__)

RETRY_AFTER_ROUNDS = 5
LEDGER = "built.json"


class BuildRecord(BaseModel):
    """One attempt at building an environment PLAN asked for."""

    round: int
    near: str
    category: list[str]
    motifs: list[str] = Field(default_factory=list)
    why: str = ""
    theme: str
    ok: bool = False
    name: str | None = None
    problem: str | None = None
    steps: dict[str, int] = Field(default_factory=dict)  # step -> tries


class BuildLedger(BaseModel):
    """Every attempt so far, by `r<round>:<near>`."""

    attempts: dict[str, BuildRecord] = Field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> BuildLedger:
        """The ledger in `root` (empty when there is none yet)."""
        path = root / LEDGER
        return cls.model_validate_json(path.read_text()) if path.is_file() else cls()

    def save(self, root: Path) -> None:
        """Write atomically: a crash leaves the old ledger or the new one, never half of one."""
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{LEDGER}.tmp"
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(root / LEDGER)

    def built(self) -> set[str]:
        """Names of the environments built so far."""
        return {r.name for r in self.attempts.values() if r.ok and r.name}

    def failed_categories(self, round_no: int) -> set[str]:
        """Top-level categories whose attempt failed in the last `RETRY_AFTER_ROUNDS` rounds."""
        return {
            r.category[0]
            for r in self.attempts.values()
            if not r.ok and round_no - r.round < RETRY_AFTER_ROUNDS
        }


def built_env_names(ctx: PhaseContext) -> set[str]:
    """The environments SYNTHESIZE built (training only: never drawn into the arena)."""
    return BuildLedger.load(grown_envs_dir(ctx)).built()


def recently_failed_categories(ctx: PhaseContext) -> set[str]:
    """Categories PLAN should not ask for again yet."""
    return BuildLedger.load(grown_envs_dir(ctx)).failed_categories(ctx.round)


async def build_new_envs(ctx: PhaseContext, requests: list[NewEnvRequest]) -> list[BuildRecord]:
    """Build each requested environment once per round (a restart reads the ledger instead)."""
    if not requests or ctx.config.synthesis.new_envs_per_round <= 0:
        return []
    root = grown_envs_dir(ctx)
    out: list[BuildRecord] = []
    for request in requests[: ctx.config.synthesis.new_envs_per_round]:
        key = f"r{ctx.round}:{request.near}"
        ledger = BuildLedger.load(root)
        if key in ledger.attempts:
            out.append(ledger.attempts[key])
            continue
        await ctx.safe_point()
        record = BuildRecord.model_validate({**request.model_dump(), "round": ctx.round})
        if ctx.sandbox_available is False:
            # A synthesized environment's tools only ever run in the sandbox.
            record.problem = "the sandbox boundary is unavailable"
        else:
            await _build(ctx, root, record)
        ledger.attempts[key] = record
        ledger.save(root)
        async with ctx.store.transaction() as s:
            action = "env.built" if record.ok else "env.build_failed"
            await repo.record_event(s, "synthesize", action, record.model_dump(mode="json"))
        log.info("synth.new_env", ok=record.ok, name=record.name, near=record.near, problem=record.problem)
        out.append(record)
    return out


async def _build(ctx: PhaseContext, root: Path, record: BuildRecord) -> None:
    from arena.synth.envgen import synthesize_environment

    staging = root / ".staging" / f"new-r{ctx.round:04d}-{record.near}"
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
    await anyio.Path(staging.parent).mkdir(parents=True, exist_ok=True)
    try:
        helper = await ctx.models.helper()
        async with sandbox_pool(ctx) as pool:
            result = await synthesize_environment(
                record.theme,
                staging,
                helper=helper,
                sandbox=pool,
                max_tries=ctx.config.synthesis.new_env_max_tries,
            )
    except Exception as exc:  # the helper or the sandbox failing must not fail the round
        log.warning("synth.new_env_error", near=record.near, error=str(exc)[:300], exc_info=True)
        record.problem = f"{type(exc).__name__}: {str(exc)[:300]}"
        return
    record.steps = {s.step: s.tries for s in result.steps}
    if not result.ok or result.name is None:
        record.problem = result.problem or "a step failed"
        return
    # Names only (no loading): the bundled, ARENA_ENV_PATH and data.env_path ones, and the grown.
    taken = set(discover(ctx.config.data.env_path)) | {env_name_of(d) for d in env_dirs_in(root)}
    if result.name in taken or (root / result.name).exists():
        record.problem = f"the name {result.name!r} is taken by an existing environment"
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(staging, ignore_errors=True))
        return
    await anyio.to_thread.run_sync(lambda: shutil.move(str(staging), str(root / result.name)))
    record.ok, record.name = True, result.name


def report_records(records: list[BuildRecord]) -> list[dict[str, Any]]:
    """What `arena report` shows of each attempt."""
    return [
        json.loads(r.model_dump_json(include={"near", "why", "ok", "name", "problem", "motifs", "steps"}))
        for r in records
    ]


def new_env_guidelines(ctx: PhaseContext, records: list[BuildRecord], envs: dict[str, Any]) -> dict[str, Any]:
    """For each environment built this round: a guideline for `synthesis.tasks_per_weak_env` tasks.

    The tasks aim at the first weak motif the new environment's tools can exercise (none: plain
    walks at the starting difficulty, still counted as targeted at the weak environment).
    """
    from arena.synth.motifs import DESCRIPTIONS, env_motif_tools, motif_difficulty
    from arena.synth.targeted import Guideline

    n = ctx.config.synthesis.tasks_per_weak_env
    out: dict[str, Any] = {}
    for record in records:
        if not record.ok or record.name not in envs or n <= 0:
            continue
        env = envs[record.name]
        tools = env_motif_tools(env)
        motif = next((m for m in record.motifs if m in tools), None)
        start = ctx.config.curriculum.initial
        out[record.name] = Guideline(
            env=record.name,
            motif=motif,  # type: ignore[arg-type]
            failure_pattern=record.why[:400],
            skill=DESCRIPTIONS[motif] if motif else f"the work of {record.near}'s category",  # type: ignore[index]
            target_tools=tools.get(motif, []) if motif else [],
            difficulty=motif_difficulty(motif, start) if motif else start,  # type: ignore[arg-type]
            n_tasks=n,
        )
    return out
