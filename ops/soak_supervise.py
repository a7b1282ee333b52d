"""`arena bench soak --kill-daemon-every N`: the daemon SIGKILLed at a random moment of every N-th
round and started again, as systemd's `Restart=always` or a Kubernetes restart would, until the
last round is done.

The soak's daemon runs in a child process (`arena bench soak --data-dir D --resume --samples-file
F`, the same code as an unsupervised soak); this process is its supervisor. It reads each round's
sample as the child writes it, kills the child (its whole process group) a random fraction of a
round into each scheduled round, starts it again on the same data directory and store, and after
every kill and at the end looks for processes the killed daemon left behind: as a child subreaper,
it adopts any process whose parent died (a sandbox's bubblewrap, say), so each is counted as an
orphan. The episodes each round committed come from the samples (taken once the round is done),
so a round redone after a kill shows a lost or duplicated episode if there is one.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import structlog
from pydantic import BaseModel, Field

from ops.soak import SoakReport, summarize, warmup_rounds
from ops.soak_phases import StandInWork
from ops.soak_probe import sample_process, set_subreaper
from ops.soak_samples import RoundSample, read_samples

log = structlog.get_logger(__name__)
EXIT_TIMEOUT_S = 30.0


class DaemonKills(BaseModel):
    """The daemon SIGKILLed mid-round on a schedule."""

    every: int = 0
    seed: int = 0
    kills: dict[int, float] = Field(default_factory=dict, description="Round -> seconds into the round.")
    orphans_after_kills: int = Field(0, description="Processes the killed daemons left behind (should be 0).")
    other_faults: dict[str, list[int]] = Field(
        default_factory=dict,
        description="The other faults' rounds over every daemon run (one cut short by a kill before its "
        "round was sampled is not seen).",
    )


class DaemonSoakReport(SoakReport):
    """The soak's report with the daemon's own kills."""

    daemon_kills: DaemonKills = Field(default_factory=DaemonKills)

    @property
    def ok(self) -> bool:
        """As the soak's, and no process left behind by a killed daemon."""
        return super().ok and not self.daemon_kills.orphans_after_kills


async def supervise_soak(
    child_args: list[str],
    rounds: int,
    every: int,
    *,
    work: StandInWork,
    seed: int = 0,
    warmup: int | None = None,
    retention: dict[str, int | None] | None = None,
) -> DaemonSoakReport:
    """Run `arena bench soak <child_args>` for `rounds` rounds, killing it in every `every`-th.
    `retention`: what the children's stores keep (`Retention` as a dict), for the report."""
    kills = DaemonKills(every=every, seed=seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="arena-soak-supervised-") as scratch:
        samples_file = Path(scratch) / "samples.jsonl"
        command = [sys.executable, "-m", "ops.cli", "bench", "soak", "--json", "--rounds", str(rounds)]
        command += [*child_args, "--data-dir", str(Path(scratch) / "data"), "--resume"]
        command += ["--samples-file", str(samples_file)]
        subreaper = set_subreaper(True)
        try:
            while True:
                finished = await _run_child(command, samples_file, rounds, every, kills)
                await anyio.sleep(0.5)  # what the killed daemon's sandboxes do on their way out
                kills.orphans_after_kills += len(sample_process(_database_servers(samples_file)).orphans)
                if finished:
                    break
        finally:
            if subreaper:
                set_subreaper(False)
        samples = _last_sample_per_round(samples_file)
        kills.other_faults = _faults_seen(samples_file)
        store = "postgresql" if any(a.startswith("postgresql") for a in child_args) else "sqlite"
        after = sample_process(_database_servers(samples_file))
    report = DaemonSoakReport(
        rounds=rounds,
        warmup=warmup_rounds(rounds, warmup),
        store=store,
        retention=retention or {},
        work=work,
        samples=samples,
        orphans_after=len(after.orphans),
        children_after=after.children,
        seconds=round(time.monotonic() - started, 2),
        daemon_kills=kills,
    )
    if [s.round for s in samples] != list(range(1, rounds + 1)):
        report.stalled = f"rounds sampled: {[s.round for s in samples]}"
    summarize(report)
    if kills.kills:
        report.notes.append(
            f"resident memory, files and threads start again with each of the {len(kills.kills)} "
            "daemons: measure their growth without --kill-daemon-every"
        )
    return report


async def _run_child(
    command: list[str], samples_file: Path, rounds: int, every: int, kills: DaemonKills
) -> bool:
    """Start the daemon and wait for it to finish (True) or kill it in a scheduled round (False)."""
    with tempfile.TemporaryFile() as output:
        # A session of its own, as every process the soak starts; the kill goes to that group.
        process = await anyio.open_process(command, start_new_session=True, stdout=output, stderr=output)
        async with anyio.create_task_group() as tg:
            killed = False

            async def kill_when_due() -> None:
                nonlocal killed
                target = await _next_target(samples_file, rounds, every, kills, process)
                if target is None:
                    return
                round_no, into = target
                await anyio.sleep(into)
                if process.returncode is None and _rounds_done(samples_file) < round_no:
                    os.killpg(process.pid, signal.SIGKILL)
                    killed = True
                    kills.kills[round_no] = round(into, 3)
                    log.info("soak.daemon_killed", round=round_no, seconds_into_round=round(into, 3))

            tg.start_soon(kill_when_due)
            code = await process.wait()
            tg.cancel_scope.cancel()
        if killed:
            return False
        if code != 0:
            output.seek(0)
            tail = output.read()[-3000:].decode(errors="replace")
            raise RuntimeError(f"the soak's daemon exited with {code}:\n{tail}")
        return True


async def _next_target(
    samples_file: Path, rounds: int, every: int, kills: DaemonKills, process: anyio.abc.Process
) -> tuple[int, float] | None:
    """Once the round before a scheduled one is done: that round, and a random moment of it."""
    read_at_size = -1
    while process.returncode is None:
        # Parsed again only when the daemon wrote a sample: a 300-round file takes ~2.5 ms to
        # parse, and this polls every 10 ms on the cores the daemon runs on.
        size = _size(samples_file)
        if size != read_at_size:
            read_at_size = size
            samples = _last_sample_per_round(samples_file)
            due = (samples[-1].round if samples else 0) + 1
            if due <= rounds and due % every == 0 and due not in kills.kills:
                seconds = [s.seconds for s in samples] or [0.5]
                return due, random.Random(f"{kills.seed}/{due}").uniform(0, statistics.median(seconds))
        await anyio.sleep(0.01)
    return None


def _faults_seen(samples_file: Path) -> dict[str, list[int]]:
    """Every round each fault was injected in, over every daemon run's samples."""
    seen: dict[str, set[int]] = {}
    for sample in read_samples(samples_file):
        for name, rounds in sample.faults.items():
            seen.setdefault(name, set()).update(rounds)
    return {name: sorted(rounds) for name, rounds in seen.items()}


def _database_servers(samples_file: Path) -> set[int]:
    """The database servers the daemons' restart faults started: adopted when a daemon was killed,
    they are the database's processes, not ones the daemon left behind."""
    return {pid for sample in read_samples(samples_file) for pid in sample.database_server_pids}


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _rounds_done(samples_file: Path) -> int:
    samples = _last_sample_per_round(samples_file)
    return samples[-1].round if samples else 0


def _last_sample_per_round(samples_file: Path) -> list[RoundSample]:
    """Each round's sample (a round redone after a kill: its last), in round order."""
    by_round = {sample.round: sample for sample in read_samples(samples_file)}
    return [by_round[r] for r in sorted(by_round)]
