"""One round of `arena bench soak` as measured (`RoundSample`), and the JSON-lines file a
supervised soak's daemons append their samples to (`ops.soak_supervise`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class RoundSample(BaseModel):
    """The daemon after one round."""

    round: int
    seconds: float
    rss_bytes: int
    open_fds: int
    threads: int
    children: int
    orphans: int
    adopted_reaped: int = Field(0, description="Adopted processes already dead (reaped, not orphans).")
    store_bytes: int
    rows: dict[str, int]
    data_dir_bytes: int
    metric_series: int
    episodes: int = Field(0, description="Episodes the round committed (tasks × samples when none is lost).")
    errored_episodes: int = 0
    integrity_problems: list[str] = Field(default_factory=list)
    faults: dict[str, list[int]] = Field(
        default_factory=dict, description="Fault -> rounds it was injected in, so far in this daemon's run."
    )
    database_server_pids: list[int] = Field(
        default_factory=list, description="A database server a restart fault started (not the daemon's)."
    )


def append_sample(path: Path, sample: RoundSample) -> None:
    """Append one sample as a line."""
    with path.open("a") as out:
        out.write(sample.model_dump_json() + "\n")


def read_samples(path: Path, offset: int = 0) -> list[RoundSample]:
    """Every sample in the file from byte `offset` on, in the order written; a line being written
    now, or cut short by a kill, is left out."""
    samples = []
    text = ""
    if path.exists():
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode()
    for line in text.splitlines():
        try:
            samples.append(RoundSample.model_validate_json(line))
        except ValueError:
            continue
    return samples
