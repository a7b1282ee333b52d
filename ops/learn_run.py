"""`arena bench learn`: the daemon's own rounds in a scratch data directory, reported round by round.

One learning path: there is no separate training pipeline to trust. The bench runs
`ops.daemon.Daemon` — the six phases, the warm-up, GRPO, the yardstick and the publish gate, the
code `make run` runs — with a configuration (default `config/cpu-demo.toml`) for N rounds, its data
directory and SQLite store in a folder of its own, with the daemon's seed fixed and the yardstick
measured after the warm-up too (`round.yardstick_after_warmup`), then reads back what the rounds
stored: the yardstick by round (`ops.yardstick_history`) with the change from round 1 and from the
previous round, the warm-up's and GRPO's shares within each round (all paired over the same tasks,
with bootstrap 95% intervals), each phase's time, the training figures and the publish decisions.
A rerun into the same folder resumes where the daemon stopped and runs only the missing rounds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ops.config import ArenaConfig, load_config
from ops.yardstick_history import RoundYardstick

DEFAULT_CONFIG = Path("config/cpu-demo.toml")


class LearnRound(BaseModel):
    """One round as the bench reports it."""

    round: int
    yardstick: RoundYardstick | None = None
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    seconds: float = 0.0
    warmup_tasks: int = 0
    sft_steps: int = 0
    grpo_steps: int = 0
    grpo_reward_mean: float | None = None
    # Sampler against trainer over GRPO's steps: mean and largest KL per token, largest token ratio.
    kl_per_token: float | None = None
    kl_per_token_max: float | None = None
    ratio_peak: float | None = None
    train_peak_rss_mb: float | None = None
    published: str | None = None  # "updated", "held back", "unchanged"


class LearnReport(BaseModel):
    """What `arena bench learn --json` prints."""

    config: str
    data_dir: str
    seed: int
    rounds: list[LearnRound]
    total_seconds: float


def bench_config(config_path: Path | None, out: Path, seed: int) -> ArenaConfig:
    """The configuration the bench runs: the file's, in `out`, seeded, the warm-up measured.

    `ARENA_*` variables override the file as they do for `arena run` (a variant of a configuration
    without a file of its own), except the keys the bench sets itself.
    """
    environ = {
        **os.environ,
        "ARENA_DATA_DIR": str(out),
        "ARENA_ADMIN__ADDRESS": "127.0.0.1:0",
        "ARENA_DAEMON__SEED": str(seed),
        "ARENA_ROUND__YARDSTICK_AFTER_WARMUP": "true",
    }
    return load_config(config_path or DEFAULT_CONFIG, environ=environ)


async def completed_rounds(config: ArenaConfig) -> int:
    """How many rounds the store in the bench's folder has completed."""
    from arena.store import Store, repo

    async with Store(config.database_url) as store:
        await store.migrate()
        async with store.transaction() as s:
            done = await repo.last_completed_round(s)
    return 0 if done is None else done.round


async def run_rounds(config: ArenaConfig, rounds: int, **daemon_kwargs: Any) -> int:
    """Run the daemon until the bench's store has completed `rounds` rounds; its exit code."""
    from ops.daemon import Daemon

    missing = rounds - await completed_rounds(config)
    if missing <= 0:
        return 0
    daemon = Daemon(config, max_rounds=missing, handle_signals=False, **daemon_kwargs)
    return await daemon.run()


def _seconds(start: Any, end: Any) -> float:
    return round((end - start).total_seconds(), 1) if start is not None and end is not None else 0.0


async def read_report(config: ArenaConfig, config_name: str) -> LearnReport:
    """The report of what the rounds in the bench's store left."""
    from sqlmodel import select

    from arena.store import PhaseRow, RoundRow, Store
    from ops.yardstick_history import read_history

    async with Store(config.database_url) as store, store.transaction() as s:
        history = {h.round: h for h in await read_history(s)}
        round_rows = list((await s.exec(select(RoundRow).order_by(RoundRow.round))).all())  # type: ignore[arg-type]
        phases = list((await s.exec(select(PhaseRow))).all())
    out: list[LearnRound] = []
    for rnd in round_rows:
        mine = {p.phase: p for p in phases if p.round == rnd.round}
        train = mine["train"].output if "train" in mine else {}
        publish = mine["publish"].output if "publish" in mine else {}
        out.append(
            LearnRound(
                round=rnd.round,
                yardstick=history.get(rnd.round),
                phase_seconds={name: _seconds(p.started_at, p.finished_at) for name, p in mine.items()},
                seconds=_seconds(rnd.started_at, rnd.finished_at),
                warmup_tasks=sum((train.get("warmup_tasks") or {}).values()),
                sft_steps=int((train.get("sft") or {}).get("total_steps") or 0),
                grpo_steps=int(train.get("steps") or 0),
                grpo_reward_mean=train.get("reward_mean"),
                kl_per_token=(train.get("grpo") or {}).get("kl_per_token"),
                kl_per_token_max=(train.get("grpo") or {}).get("kl_per_token_max"),
                ratio_peak=(train.get("grpo") or {}).get("ratio_peak"),
                train_peak_rss_mb=train.get("peak_rss_mb"),
                published=publish.get("policy"),
            )
        )
    return LearnReport(
        config=config_name,
        data_dir=str(config.data.dir),
        seed=config.daemon.seed,
        rounds=out,
        total_seconds=round(sum(r.seconds for r in out), 1),
    )


def render(report: LearnReport) -> list[str]:
    """The report as terminal lines: the yardstick by round, then each round's shares and times."""
    from ops.yardstick_history import table

    history = [r.yardstick for r in report.rounds if r.yardstick is not None]
    lines = [f"arena bench learn: {report.config}, seed {report.seed}, {report.data_dir}"]
    lines += table(history) if history else ["no yardstick measured"]
    for r in report.rounds:
        times = ", ".join(f"{k} {v / 60:.1f}" for k, v in r.phase_seconds.items())
        peak = f"; TRAIN resident peak {r.train_peak_rss_mb / 1024:.1f} GiB" if r.train_peak_rss_mb else ""
        lines.append(
            f"round {r.round}: {r.seconds / 60:.1f} min ({times} min); publish {r.published or '-'}{peak}"
        )
        y = r.yardstick
        if y is not None and y.warmup is not None and y.warmup_change is not None:
            lines.append(
                f"  after the warm-up ({r.warmup_tasks} tasks, {r.sft_steps} steps): {y.warmup.text()}; "
                f"share {y.warmup_change.text()}"
            )
        if y is not None and y.candidate is not None and y.grpo_change is not None:
            lines.append(
                f"  after GRPO ({r.grpo_steps} steps): {y.candidate.text()}; share {y.grpo_change.text()}"
            )
        if r.kl_per_token is not None:
            lines.append(
                f"  sampler vs trainer: KL per token {r.kl_per_token:.2e} (step max {r.kl_per_token_max:.2e}), "
                f"largest token ratio {r.ratio_peak or 1.0:.3g}"
            )
    lines.append(f"total {report.total_seconds / 60:.1f} min")
    return lines
