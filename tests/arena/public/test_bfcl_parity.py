"""Parity with BFCL's own checker: every entry's ground truth and five perturbations of it (a call
dropped, an argument changed, an extra call, a call moved to the next turn, a call in a turn that
expects none), scored by Arena and by bfcl-eval's `multi_turn_checker` (and its
`multi_turn_irrelevance_checker`) running in a side environment of their own: `python -S` with
only bfcl-eval (no dependencies) and mpmath on its path, never Arena's venv.

Both of Arena's modes are compared: the default (the irrelevance rule on) against both BFCL
checkers, and `irrelevance=False` against `multi_turn_checker` alone (what bfcl-eval's runner
applies). Every disagreement must be one of `EXPLAINED`, so a new one fails the test by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.env.object_runtime import ObjectRunner
from arena.public.bfcl.checker import judge, normalize, scoring_request

from .perturb import KINDS, perturb

pytestmark = pytest.mark.slow
SIDE_CHECKER = Path(__file__).with_name("bfcl_side_checker.py")
# Trajectory key -> why Arena and BFCL disagree there. None on bfcl-eval 2026.3.23 (4,392 trajectories).
EXPLAINED: dict[str, str] = {}


def _start_bfcl(side: Path, jobs: list[dict[str, Any]], folder: Path) -> subprocess.Popen[str]:
    """BFCL's checker on every job, in the background (it and Arena's scoring share the two cores)."""
    (folder / "jobs.jsonl").write_text("".join(json.dumps(j) + "\n" for j in jobs))
    with open(folder / "jobs.jsonl") as stdin, open(folder / "verdicts.jsonl", "w") as stdout:
        return subprocess.Popen(
            [sys.executable, "-S", str(SIDE_CHECKER), str(side)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
        )


def _bfcl_verdicts(process: subprocess.Popen[str], folder: Path) -> dict[str, dict[str, Any]]:
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    lines = (folder / "verdicts.jsonl").read_text().splitlines()
    return {o["key"]: o for o in map(json.loads, lines)}


async def _arena_verdicts(bfcl: Any, jobs: list[dict[str, Any]]) -> dict[str, tuple[bool, bool]]:
    runner = ObjectRunner(bfcl.backend(), "bfcl")
    out = {}
    for job in jobs:
        entry, decoded = bfcl.entry(job["id"]), normalize(job["decoded"])
        reply = await runner.run(scoring_request(entry, decoded))  # every turn count matches here
        strict = judge(entry, decoded, reply).passed
        out[job["key"]] = (strict, judge(entry, decoded, reply, irrelevance=False).passed)
    return out


def test_arena_scores_every_perturbed_trajectory_as_bfcls_own_checker_does(
    bfcl: Any, bfcl_side: Path, tmp_path: Path
) -> None:
    jobs = [
        {"key": f"{e.id}/{kind}", "id": e.id, "decoded": decoded}
        for entries in bfcl.entries.values()
        for e in entries
        for kind in KINDS
        if (decoded := perturb(e.id, e.ground_truth, kind)) is not None
    ]
    process = _start_bfcl(bfcl_side, jobs, tmp_path)
    arena_says = anyio.run(_arena_verdicts, bfcl, jobs)
    bfcl_says = _bfcl_verdicts(process, tmp_path)
    crashed = {k: v["crash"] for k, v in bfcl_says.items() if "crash" in v}
    assert not crashed, f"BFCL's checker raised on: {crashed}"
    disagreements: dict[str, str] = {}
    for job in jobs:
        key, theirs = job["key"], bfcl_says[job["key"]]
        strict, lenient = arena_says[key]
        if strict != (theirs["valid"] and theirs["irrelevance_valid"]):
            disagreements[key] = f"strict: arena {strict}, bfcl {theirs}"
        if lenient != theirs["valid"]:
            disagreements[key + " (lenient)"] = f"lenient: arena {lenient}, bfcl {theirs}"
    agreement = 1 - len(disagreements) / (2 * len(jobs))
    kinds = Counter(j["key"].rsplit("/", 1)[1] for j in jobs)
    failed = Counter(k.rsplit("/", 1)[1] for k, (strict, _) in arena_says.items() if not strict)
    summary = {
        "trajectories": len(jobs),
        "agreement": agreement,
        "kinds": dict(kinds),
        "failed": dict(failed),
    }
    print(json.dumps(summary))  # the figures the README quotes (pytest -s)
    assert agreement >= 0.995 and set(disagreements) <= set(EXPLAINED), disagreements
    # Every entry is in: gold and four mistakes each (miss_func/miss_param: the irrelevance one too).
    assert (
        kinds["gold"] == kinds["drop"] == kinds["arg"] == kinds["extra"] == 800
        and kinds["irrelevance"] >= 400
    )
    # And the mistakes are told apart: gold never fails, dropped calls and irrelevance calls always do.
    assert "gold" not in failed and failed["drop"] == 800 and failed["irrelevance"] == kinds["irrelevance"]
    assert 0 < failed["extra"] < 800 and 0 < failed["arg"] < 800
