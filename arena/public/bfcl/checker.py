"""BFCL multi-turn scoring, re-implemented: an entry scores 1 or 0, by BFCL's rules.

Why not BFCL's own `multi_turn_checker`: it keeps every backend instance it builds in module
globals keyed by model name and entry id, for the life of the process, which a daemon that scores
every round cannot live with. The rules, applied to a *decoded* trajectory (per turn, per step,
call expressions such as `"cd(folder='document')"`, empty steps dropped as BFCL's runner drops
them), with the policy's calls and the ground truth each played on fresh instances:

1. A trajectory with another number of turns than the ground truth was cut short (BFCL's step
   cap ended it): `force_terminated`.
2. In turn order, for every turn whose ground truth has calls:
   - the policy made no call in it: `empty_turn`;
   - an involved instance's public attributes differ from those of the ground truth's instance
     after the same turn: `state_mismatch`;
   - some ground-truth call's result of that turn is not among the results of every call the
     policy made so far (all turns; as a multiset, in any order): `missing_result`.
3. Then every turn whose ground truth is empty (an irrelevance turn: a function is missing, or a
   parameter the user did not give) must have no call: `irrelevance`. The policy's calls there
   still run, so a state they change shows at the next checked turn.

The error types carry BFCL's own names beside them (`bfcl_error_type`). Rule 3 is BFCL's
`multi_turn_irrelevance_checker`; `irrelevance=False` leaves it out, as bfcl-eval's own runner
(2026.3.23) does: it imports that checker but never calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from arena.env.object_runtime import ObjectRunner
from arena.env.objects import Comparison, Track, TracksReply, TracksRequest
from arena.public.bfcl.model import BfclEntry

ErrorType = Literal[
    "force_terminated",
    "empty_turn",
    "state_mismatch",
    "missing_result",
    "irrelevance",
    "inference_error",
    "execution_limit",
]
BFCL_ERROR_TYPES: dict[str, str] = {
    "force_terminated": "multi_turn:force_terminated",
    "empty_turn": "multi_turn:empty_turn_model_response",
    "state_mismatch": "multi_turn:instance_state_mismatch",
    "missing_result": "multi_turn:execution_response_mismatch",
    "irrelevance": "multi_turn:irrelevance_error:decoder_success",
    "inference_error": "multi_turn:inference_error",
}  # `execution_limit` (the calls broke a sandbox limit) is Arena's own: BFCL has no sandbox
Decoded = list[list[list[str]]]


class Verdict(BaseModel):
    """One entry's score and, when it failed, why (the first failing rule and turn)."""

    entry_id: str
    category: str
    passed: bool
    error_type: ErrorType | None = None
    bfcl_error_type: str | None = None
    turn: int | None = None
    detail: str = ""


def normalize(decoded: Sequence[Sequence[Sequence[str]]]) -> Decoded:
    """Drop empty steps (BFCL's runner drops steps that decode to no call)."""
    return [[list(step) for step in turn if step] for turn in decoded]


def _empty(turn: Sequence[Sequence[str]]) -> bool:
    # BFCL's `is_empty_execute_response`: no step, or one step without calls.
    return len(turn) == 0 or (len(turn) == 1 and len(turn[0]) == 0)


def fail(entry: BfclEntry, error: ErrorType, turn: int | None, detail: str) -> Verdict:
    """A failed verdict with BFCL's name for the error."""
    return Verdict(
        entry_id=entry.id,
        category=entry.category,
        passed=False,
        error_type=error,
        bfcl_error_type=BFCL_ERROR_TYPES.get(error),
        turn=turn,
        detail=detail[:500],
    )


def scoring_request(entry: BfclEntry, decoded: Decoded) -> TracksRequest:
    """The policy's calls and the ground truth on fresh instances, compared after each checked turn."""

    def track(turns: list[list[str]]) -> Track:
        return Track(
            classes=entry.involved_classes,
            config=entry.initial_config,
            options={"long_context": entry.long_context},
            turns=turns,
        )

    flat = [[call for step in turn for call in step] for turn in decoded]
    compare = [
        Comparison(turn=t, track="model", reference="truth") for t, gt in enumerate(entry.ground_truth) if gt
    ]
    return TracksRequest(tracks={"model": track(flat), "truth": track(entry.ground_truth)}, compare=compare)


def _missing(expected: list[str], seen: list[str]) -> list[str]:
    pool = list(seen)
    missing = []
    for item in expected:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def judge(entry: BfclEntry, decoded: Decoded, reply: TracksReply, *, irrelevance: bool = True) -> Verdict:
    """Apply the rules to a played scoring request (`scoring_request(entry, decoded)`)."""
    checked = [t for t, gt in enumerate(entry.ground_truth) if gt]
    so_far: list[str] = []
    for t, gt in enumerate(entry.ground_truth):
        so_far += reply.results["model"][t]
        if not gt:
            continue
        if _empty(decoded[t]):
            return fail(entry, "empty_turn", t, f"no call in turn {t}, whose ground truth has {len(gt)}")
        differing = reply.differences[checked.index(t)]
        if differing:
            return fail(entry, "state_mismatch", t, "differs after turn: " + ", ".join(differing))
        missing = _missing(reply.results["truth"][t], so_far)
        if missing:
            return fail(
                entry, "missing_result", t, "results never seen: " + "; ".join(m[:120] for m in missing)
            )
    if irrelevance:
        for t, gt in enumerate(entry.ground_truth):
            if not gt and not _empty(decoded[t]):
                calls = [c for step in decoded[t] for c in step]
                return fail(entry, "irrelevance", t, f"calls in a turn that expects none: {calls[:5]}")
    return Verdict(entry_id=entry.id, category=entry.category, passed=True)


async def score(
    entry: BfclEntry,
    decoded: Sequence[Sequence[Sequence[str]]],
    runner: ObjectRunner,
    *,
    irrelevance: bool = True,
) -> Verdict:
    """Score one decoded trajectory of `entry` (its calls run where `runner` runs code)."""
    turns = normalize(decoded)
    if len(turns) != len(entry.ground_truth):
        return fail(
            entry,
            "force_terminated",
            len(turns),
            f"{len(turns)} turns played of {len(entry.ground_truth)}: the step cap ended the entry",
        )
    reply = await runner.run(scoring_request(entry, turns))
    return judge(entry, turns, reply, irrelevance=irrelevance)
