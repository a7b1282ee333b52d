"""What the real phases share: loaded environments, the sandbox pool, trainer settings, the policy folder.

Everything here maps the daemon's configuration onto the lower packages' own models (a round's
`trainer.config.TrainerConfig`, `arena.sandbox.SandboxLimits`, ...), so that EVALUATE, TRAIN and
the SFT warm-up show the policy exactly the same prompts, tools and turn caps.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ops.phases.base import PhaseContext
from ops.phases.common import registry

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from ops.config_sections import SandboxConfig
    from ops.metrics import Metrics
    from trainer.config import TrainerConfig

log = structlog.get_logger(__name__)
GATES = ("duplicate", "stability", "gold", "adversary")


def grown_envs_dir(ctx: PhaseContext) -> Path:
    """Where SYNTHESIZE keeps environments it grew (`ArenaConfig.envs_dir`); they override the originals."""
    return ctx.config.envs_dir


def load_envs(ctx: PhaseContext) -> dict[str, Any]:
    """A phase's environments: `load_environments` with its configuration, metrics and sandbox boundary."""
    return load_environments(ctx.config, ctx.metrics, sandbox_available=ctx.sandbox_available)


def load_environments(
    config: ArenaConfig, metrics: Metrics, *, sandbox_available: bool | None
) -> dict[str, Any]:
    """Every registered environment by name (labels declared for the metrics), grown ones last.

    Without a sandbox boundary (`sandbox_available` False) the environments whose tools must
    run in the sandbox (synthesized ones; every one with ARENA_SANDBOX=all) are refused, so the
    honest ones go on being evaluated and trained; the daemon said why at start-up.
    """
    envs = registry(config, metrics).load_all()
    grown = config.envs_dir
    if grown.is_dir():
        from arena.env.errors import EnvLoadError
        from arena.env.loader import load_environment
        from arena.env.registry import env_dirs_in

        # Cached by content version: a folder replaced in place (the environment grew again) is a
        # new version, and an unchanged one is the same object in every phase, so a synthesized
        # environment is described in the sandbox once, not by each phase's pool again.
        for folder in env_dirs_in(grown):
            try:
                env = load_environment(folder)
            except EnvLoadError as exc:
                # One folder edited by hand into a broken state must not stop every phase.
                log.warning("phase.env_folder_broken", folder=str(folder), error=str(exc)[:300])
                continue
            envs[env.name] = env
    return _usable(sandbox_available, envs)


def _usable(sandbox_available: bool | None, envs: dict[str, Any]) -> dict[str, Any]:
    if sandbox_available is not False:
        return envs
    refused = sorted(name for name, env in envs.items() if getattr(env, "sandboxed", False))
    if refused:
        log.warning(
            "phase.sandboxed_envs_refused", envs=refused, reason="the sandbox boundary is unavailable"
        )
    return {name: env for name, env in envs.items() if name not in refused}


async def describe_sandboxed(ctx: PhaseContext, envs: dict[str, Any], names: Iterable[str]) -> None:
    """Tool schemas (and so write tools and motifs) of the sandboxed environments among `names`.

    A synthesized environment knows only its tool names until a sandbox worker describes its
    tools.py. One that no longer loads there is dropped from `envs` (and logged), not fatal.
    """
    from arena.env.errors import EnvLoadError

    todo = [n for n in names if n in envs and envs[n].sandboxed and not envs[n].described]
    if not todo:
        return
    async with sandbox_pool(ctx) as pool:
        for name in todo:
            try:
                await envs[name].describe(pool)
            except EnvLoadError as exc:
                log.warning("phase.env_undescribable", env=name, error=str(exc)[:300])
                envs.pop(name)


def checkpoints_dir(ctx: PhaseContext) -> Path:
    """Where training rounds keep their checkpoints (`DATA_DIR/checkpoints/round-NNNN`)."""
    return ctx.config.data.dir / "checkpoints"


def round_dir(ctx: PhaseContext) -> Path:
    """This round's training output folder."""
    return checkpoints_dir(ctx) / f"round-{ctx.round:04d}"


def prune_round_dirs(root: Path, keep: int, protect: Iterable[Path]) -> list[Path]:
    """Delete the round folders under `root` but the newest `keep` (blocking); returns the deleted.

    A folder holding any of `protect` (the policy just published, the one it was trained from)
    stays whatever its number: a round that fails before its own publish trains from the latter.
    """
    rounds: list[tuple[int, Path]] = []
    for folder in root.glob("round-*"):
        number = folder.name.removeprefix("round-")
        if number.isdigit() and folder.is_dir():
            rounds.append((int(number), folder))
    rounds.sort()
    kept = [p.resolve() for p in protect]
    doomed = [
        folder
        for _, folder in rounds[:-keep]
        if not any(path.is_relative_to(folder.resolve()) for path in kept)
    ]
    for folder in doomed:
        shutil.rmtree(folder, ignore_errors=True)
    return doomed


@asynccontextmanager
async def sandbox_pool(ctx: PhaseContext, *, needed: bool = True) -> AsyncIterator[Any]:
    """A phase's sandbox pool: `open_sandbox_pool` with its `[sandbox]` section and metrics."""
    async with open_sandbox_pool(ctx.config.sandbox, ctx.metrics, needed=needed) as pool:
        yield pool


@asynccontextmanager
async def open_sandbox_pool(
    cfg: SandboxConfig, metrics: Metrics, *, needed: bool = True
) -> AsyncIterator[Any]:
    """A sandbox pool sized by `cfg` whose kills feed `arena_sandbox_kills_total` (None if not needed)."""
    from arena.sandbox import SandboxPool

    if not needed:
        yield None
        return

    limits = cfg.limits()

    def on_kill(kind: str) -> None:
        metrics.sandbox_kills.labels(reason=kind).inc()
        metrics.errors.labels(component="sandbox").inc()

    async with SandboxPool(limits, workers=cfg.workers, on_kill=on_kill) as pool:
        yield pool


def trainer_config(config: ArenaConfig, round_no: int, *, temperature: float = 1.0) -> TrainerConfig:
    """The trainer's configuration for round `round_no`: `[trainer]` with the round's derived fields.

    `ops.config_trainer.for_round` fills in what `[round]`, `models.policy` and `daemon.seed` set.
    Evaluation uses the same one with temperature 0, so prompts, tool views and caps match training;
    `arena config check` derives it the same way, so it refuses what a round would.
    """
    from ops.config_trainer import for_round

    return for_round(
        config.trainer,
        config.round,
        config.models.policy,
        seed=config.daemon.seed + round_no,
        temperature=temperature,
    )


async def serve_live_policy(ctx: PhaseContext) -> Path | None:
    """Load the newest published policy into the http policy server; returns it (None: nothing to do).

    A policy server that restarted serves the weights it was started from, not the trained ones:
    EVALUATE calls this first so that it never measures the wrong policy. The shared copy made at
    PUBLISH is reused (the publisher knows what it copied), so this costs a reload, not a copy.
    """
    if ctx.config.models.policy.backend != "http":
        return None
    policy_dir, checkpoint_id = await current_policy_dir(ctx)
    if checkpoint_id is None:  # a fresh run: the server's starting weights are the policy
        return None
    from trainer.checkpoints import read_lineage

    lineage = await anyio.to_thread.run_sync(read_lineage, policy_dir)
    await http_publisher(ctx).publish(policy_dir, round_id=lineage.round_id, step=lineage.step)
    return policy_dir


def http_publisher(ctx: PhaseContext) -> Any:
    """The `HttpWeightPublisher` for the http policy server (`models.policy`, `trainer.publish_dir`).

    It publishes to every replica of `models.policy` through the process's shared replica pool, the
    one the policy clients use: a replica that fails to load new weights leaves their rotation, and
    one that returns gets the live weights before it serves again.
    """
    from simulate.replicas import shared_pool
    from trainer.publish import HttpWeightPublisher

    section, shared = ctx.config.models.policy, ctx.config.trainer.publish_dir
    if shared is None:
        raise ValueError("trainer.publish_dir is needed to publish weights to an HTTP policy server")
    if not section.urls:  # a local policy: the publisher refuses the missing URL with its own message
        return HttpWeightPublisher("", shared)
    pool = shared_pool(
        section.urls,
        role="policy",
        cooldown_s=section.breaker_cooldown_s,
        probe_timeout_s=section.connect_timeout_s,
        api_key=section.api_key_value(),
    )
    return HttpWeightPublisher(section.urls, shared, api_key=section.api_key_value(), pool=pool)


async def base_policy_dir(ctx: PhaseContext) -> Path:
    """The weights a fresh run starts from: `trainer.base_model`, the local policy folder, or the embedded model."""
    if ctx.config.trainer.base_model is not None:
        return ctx.config.trainer.base_model
    section = ctx.config.models.policy
    if section.backend == "local" and section.model != "embedded":
        return Path(section.model)
    from simulate.embedded import ensure_embedded_model

    # Converting the GGUF once is blocking work; keep the admin API answering meanwhile.
    return await anyio.to_thread.run_sync(ensure_embedded_model, ctx.config.data.dir / "models")


async def current_policy_dir(ctx: PhaseContext) -> tuple[Path, str | None]:
    """The policy to train from: the newest published checkpoint (and its id), else the base weights.

    A published checkpoint whose folder is gone (a volume not mounted, a restore without the
    checkpoints) is an error, not a reason to train the base weights again over weeks of work.
    """
    from arena.store import repo

    async with ctx.store.transaction() as s:
        latest = await repo.latest_checkpoint(s, published=True)
    if latest is None:
        return await base_policy_dir(ctx), None
    if not await anyio.Path(latest.path).is_dir():
        raise FileNotFoundError(
            f"the published policy {latest.id} is missing at {latest.path}: restore it (see Backup in "
            "docs/operations.md) before training goes on"
        )
    return Path(latest.path), latest.id


def record_synthesis(ctx: PhaseContext, report: Any, origin: str) -> dict[str, Any]:
    """Feed one `SynthesisReport` into the gate/acceptance metrics; returns its summary."""
    # Gates run in order (solvability is off in the daemon), so a task passed gate i if it was
    # kept or rejected by a later gate.
    later = report.kept
    for gate in reversed(GATES):
        rejected = report.rejections.get(gate, 0)
        if rejected or later:
            ctx.metrics.synthesis_gate.labels(gate=gate, result="rejected").inc(rejected)
            ctx.metrics.synthesis_gate.labels(gate=gate, result="accepted").inc(later)
        later += rejected
    # Each non-working agent of the adversary gate: tasks it earned nothing on, tasks it paid on.
    for agent, counts in report.adversaries.items():
        ctx.metrics.synthesis_gate.labels(gate=f"adversary_{agent}", result="accepted").inc(
            counts.get("held", 0)
        )
        ctx.metrics.synthesis_gate.labels(gate=f"adversary_{agent}", result="rejected").inc(
            counts.get("paid", 0)
        )
    ctx.metrics.tasks_synthesized.labels(origin=origin).inc(report.kept)
    summary = report.summary()
    return {
        k: summary[k]
        for k in (
            "env",
            "kind",
            "requested",
            "kept",
            "attempts",
            "rejections",
            "adversaries",
            "model_calls",
            "tokens",
        )
    } | {"seconds": round(report.seconds, 3)}
