"""Multi-dimensional adaptive difficulty (TRUSTEE-style), one environment at a time.

After each round the controller folds the round's pass rate into a per-environment EMA and:
- raises one knob when the EMA is above the band: the knob the policy has *mastered* most, i.e.
  the one whose episodes at or above the current level succeeded most often this round (ties
  broken by `RAISE_ORDER`);
- lowers one knob when the EMA is below the band: the most recently raised one (undo first), or
  else the knob whose episodes at or above the current level failed most;
- holds inside the band, or when the round had fewer than `min_episodes` episodes.
Moving one knob by one level at a time keeps each move small relative to the band, so success
settles inside it instead of oscillating around it. Every decision carries its reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from arena.difficulty import KNOBS, RAISE_ORDER, KnobName
from curriculum.state import CurriculumConfig, CurriculumState, Decision, EnvCurriculum, EpisodeOutcome


def _knob_success(record: EnvCurriculum, outcomes: list[EpisodeOutcome]) -> dict[KnobName, float]:
    """Per knob, the success rate of this round's episodes at or above the current level of that knob."""
    rates: dict[KnobName, float] = {}
    for knob in RAISE_ORDER:
        level = record.difficulty.level(knob)
        relevant = [o.passed for o in outcomes if o.difficulty.level(knob) >= level]
        if relevant:
            rates[knob] = sum(relevant) / len(relevant)
    return rates


def _choose_raise(record: EnvCurriculum, rates: dict[KnobName, float]) -> KnobName | None:
    candidates = [k for k in RAISE_ORDER if record.difficulty.level(k) < KNOBS[k].max_level]
    if not candidates:
        return None
    # max() keeps the first of equal keys, so RAISE_ORDER breaks ties.
    return max(candidates, key=lambda k: rates.get(k, 0.0))


def _choose_lower(record: EnvCurriculum, rates: dict[KnobName, float]) -> KnobName | None:
    for knob in reversed(record.raised):
        if record.difficulty.level(knob) > KNOBS[knob].min_level:
            return knob
    candidates = [k for k in RAISE_ORDER if record.difficulty.level(k) > KNOBS[k].min_level]
    if not candidates:
        return None
    return min(candidates, key=lambda k: rates.get(k, 1.0))


def _decide(
    record: EnvCurriculum, outcomes: list[EpisodeOutcome], config: CurriculumConfig, round_id: int
) -> Decision:
    n = len(outcomes)
    if n < config.min_episodes:
        return Decision(
            round=round_id,
            env=record.env,
            action="insufficient",
            success_ema=record.success_ema,
            reason=f"{n} episode(s) this round, fewer than min_episodes={config.min_episodes}: hold",
        )
    rate = sum(o.passed for o in outcomes) / n
    ema = (
        rate
        if record.success_ema is None
        else config.ema_alpha * rate + (1 - config.ema_alpha) * record.success_ema
    )
    record.success_ema = ema
    rates = _knob_success(record, outcomes)
    base = dict(round=round_id, env=record.env, success_rate=rate, success_ema=ema)
    if ema > config.band_high:
        knob = _choose_raise(record, rates)
        if knob is None:
            return Decision(
                **base, action="hold", reason=f"EMA {ema:.2f} above band but every knob is at its maximum"
            )
        old = record.difficulty.level(knob)
        record.difficulty = record.difficulty.with_level(knob, old + 1)
        record.raised.append(knob)
        # Success measured at the old difficulty no longer describes the new one: the next round's
        # rate seeds the EMA afresh.
        record.success_ema = None
        return Decision(
            **base,
            action="raise",
            knob=knob,
            from_level=old,
            to_level=old + 1,
            reason=f"EMA {ema:.2f} > {config.band_high}: raise {knob} "
            f"(success {rates.get(knob, 0.0):.2f} at or above its level)",
        )
    if ema < config.band_low:
        knob = _choose_lower(record, rates)
        if knob is None:
            return Decision(
                **base, action="hold", reason=f"EMA {ema:.2f} below band but every knob is at its minimum"
            )
        old = record.difficulty.level(knob)
        record.difficulty = record.difficulty.with_level(knob, old - 1)
        if knob in record.raised:
            # Remove the most recent raise of this knob.
            idx = len(record.raised) - 1 - record.raised[::-1].index(knob)
            record.raised.pop(idx)
        record.success_ema = None
        return Decision(
            **base,
            action="lower",
            knob=knob,
            from_level=old,
            to_level=old - 1,
            reason=f"EMA {ema:.2f} < {config.band_low}: lower {knob}",
        )
    return Decision(
        **base, action="hold", reason=f"EMA {ema:.2f} inside band [{config.band_low}, {config.band_high}]"
    )


def update_curriculum(
    state: CurriculumState,
    outcomes: Iterable[EpisodeOutcome],
    config: CurriculumConfig,
    round_id: int,
    envs: Iterable[str] = (),
) -> tuple[CurriculumState, list[Decision]]:
    """Fold one round's verified episodes into the state; returns the new state and the decisions.

    `envs` lists environments to track even when they had no episode this round (they get an
    `insufficient` decision and keep their difficulty). The input state is not modified.
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
