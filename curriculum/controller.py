"""Multi-dimensional adaptive difficulty (TRUSTEE-style), one environment at a time, from intervals.

Each round's verified episodes (evaluation, and the previous round's training rollouts, each with
the difficulty its task was made at) are sorted per environment into evidence that accumulates
until the difficulty moves:
- episodes at exactly the current difficulty: the success rate and its Wilson 95% interval;
- probes: episodes one level away on one knob (`curriculum.probes` makes them), so success is
  measured per knob rather than inferred from a single level.
Each round with episodes weighs the older evidence by (1 − `ema_alpha`), so an improving learner
is judged mostly by its recent rounds.
The controller then
- raises one knob when the success rate is above the band and its interval lies above the band's
  centre: the knob whose +1 probe succeeded best (lower interval bound; `RAISE_ORDER` without
  probe evidence);
- lowers one knob when the rate is below the band and its interval lies below the centre: the knob
  whose −1 probe succeeded best, else the most recently raised one;
- holds otherwise (too few episodes, inside the band, or an interval that still reaches the band's
  centre: a point estimate over four episodes is not evidence).
Moving one knob by one level keeps each move small relative to the band. Every decision carries
the counts, interval and probes it rests on, in its fields and in its reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from arena.difficulty import KNOBS, RAISE_ORDER, Difficulty, KnobName
from curriculum.state import CurriculumConfig, CurriculumState, Decision, EnvCurriculum, EpisodeOutcome
from curriculum.stats import wilson_interval


def probe_key(current: Difficulty, other: Difficulty) -> str | None:
    """`"knob+1"` / `"knob-1"` when `other` is `current` moved one level on one knob, else None."""
    diffs = [(k, other.level(k) - current.level(k)) for k in KNOBS if other.level(k) != current.level(k)]
    if len(diffs) != 1 or abs(diffs[0][1]) != 1:
        return None
    knob, step = diffs[0]
    return f"{knob}{'+' if step > 0 else '-'}1"


def _fold(record: EnvCurriculum, outcomes: list[EpisodeOutcome], keep: float) -> None:
    """Add a round's outcomes to the evidence after weighting the older evidence by `keep`."""
    if not outcomes:
        return  # a round without episodes of this environment leaves its evidence as it was
    record.level_passed *= keep
    record.level_episodes *= keep
    for counts in record.probes.values():
        counts[0] *= keep
        counts[1] *= keep
    for o in outcomes:
        if o.difficulty == record.difficulty:
            record.level_episodes += 1
            record.level_passed += int(o.passed)
        elif (key := probe_key(record.difficulty, o.difficulty)) is not None:
            counts = record.probes.setdefault(key, [0, 0])
            counts[0] += int(o.passed)
            counts[1] += 1


def _probe_text(record: EnvCurriculum, key: str) -> str:
    passed, n = record.probes[key]
    low, high = wilson_interval(passed, n)
    return f"{key}: {passed:g}/{n:g} passed [{low:.2f}-{high:.2f}]"


def _best_probe(record: EnvCurriculum, knobs: list[KnobName], sign: str) -> KnobName | None:
    """The knob whose probe in direction `sign` has the highest lower success bound (None: no probe)."""
    scored = [
        (wilson_interval(*record.probes[f"{k}{sign}1"])[0], -i, k)
        for i, k in enumerate(knobs)
        if record.probes.get(f"{k}{sign}1", [0, 0])[1] > 0
    ]
    return max(scored)[2] if scored else None


def _move(record: EnvCurriculum, knob: KnobName, step: int) -> tuple[int, int]:
    old = record.difficulty.level(knob)
    record.difficulty = record.difficulty.with_level(knob, old + step)
    if step > 0:
        record.raised.append(knob)
    elif knob in record.raised:
        # Remove the most recent raise of this knob.
        record.raised.pop(len(record.raised) - 1 - record.raised[::-1].index(knob))
    record.moved()
    return old, old + step


def _decide(
    record: EnvCurriculum, outcomes: list[EpisodeOutcome], config: CurriculumConfig, round_id: int
) -> Decision:
    if outcomes:
        rate_now = sum(o.passed for o in outcomes) / len(outcomes)
        record.success_ema = (
            rate_now
            if record.success_ema is None
            else config.ema_alpha * rate_now + (1 - config.ema_alpha) * record.success_ema
        )
    _fold(record, outcomes, 1.0 - config.ema_alpha)
    n, passed = record.level_episodes, record.level_passed
    low, high = wilson_interval(passed, n)
    base = dict(
        round=round_id,
        env=record.env,
        success_rate=passed / n if n else None,
        success_ema=record.success_ema,
        passed=passed,
        episodes=n,
        interval=(round(low, 4), round(high, 4)) if n else None,
    )
    at = f"{passed:g}/{n:g} passed at the current difficulty (95% CI {low:.2f}-{high:.2f})"
    if n < config.min_episodes:
        return Decision(
            **base,
            action="insufficient",
            reason=f"{n:g} episode(s) at the current difficulty (recent rounds weigh more), fewer than "
            f"min_episodes={config.min_episodes}: hold",
        )
    rate = passed / n
    centre = (config.band_low + config.band_high) / 2
    if rate > config.band_high and low > centre:
        candidates = [k for k in RAISE_ORDER if record.difficulty.level(k) < KNOBS[k].max_level]
        if not candidates:
            return Decision(
                **base, action="hold", reason=f"{at}, above the band, but every knob is at its maximum"
            )
        knob = _best_probe(record, candidates, "+") or candidates[0]
        why = (
            _probe_text(record, f"{knob}+1") if f"{knob}+1" in record.probes else "no probe yet: raise order"
        )
        old, new = _move(record, knob, +1)
        return Decision(
            **base,
            action="raise",
            knob=knob,
            from_level=old,
            to_level=new,
            reason=f"{at}: above {config.band_high} and clear of the band centre {centre:.2f}; raise {knob} ({why})",
        )
    if rate < config.band_low and high < centre:
        candidates = [k for k in RAISE_ORDER if record.difficulty.level(k) > KNOBS[k].min_level]
        if not candidates:
            return Decision(
                **base, action="hold", reason=f"{at}, below the band, but every knob is at its minimum"
            )
        recent = next((k for k in reversed(record.raised) if k in candidates), None)
        knob = _best_probe(record, candidates, "-") or recent or candidates[0]
        why = (
            _probe_text(record, f"{knob}-1")
            if f"{knob}-1" in record.probes
            else ("undo the latest raise" if knob == recent else "no probe yet: first lowerable knob")
        )
        old, new = _move(record, knob, -1)
        return Decision(
            **base,
            action="lower",
            knob=knob,
            from_level=old,
            to_level=new,
            reason=f"{at}: below {config.band_low} and clear of the band centre {centre:.2f}; lower {knob} ({why})",
        )
    where = (
        "inside the band"
        if config.band_low <= rate <= config.band_high
        else "interval reaches the band centre"
    )
    return Decision(
        **base,
        action="hold",
        reason=f"{at}: {where} [{config.band_low}, {config.band_high}]: hold and gather more",
    )


def update_curriculum(
    state: CurriculumState,
    outcomes: Iterable[EpisodeOutcome],
    config: CurriculumConfig,
    round_id: int,
    envs: Iterable[str] = (),
) -> tuple[CurriculumState, list[Decision]]:
    """Fold one round's verified episodes into the state; returns the new state and the decisions.

    `envs` lists environments to track even when they had no episode this round (they keep their
    difficulty and evidence). The input state is not modified.
    """
    new = state.model_copy(deep=True)
    new.round = round_id
    by_env: dict[str, list[EpisodeOutcome]] = defaultdict(list)
    for outcome in outcomes:
        by_env[outcome.env].append(outcome)
    decisions: list[Decision] = []
    for env in sorted(set(by_env) | set(envs)):
        record = new.env(env, config.initial)
        episodes = by_env.get(env, [])
        record.episodes += len(episodes)
        record.successes += sum(o.passed for o in episodes)
        record.rounds += 1
        decisions.append(_decide(record, episodes, config, round_id))
    return new, decisions
