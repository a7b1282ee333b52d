"""How far simulated tools and the judge can be trusted, measured against executable environments.

A bundled executable environment has real tools and a programmatic verifier: the ground truth for
the helper playing the same tools and judging the same episodes. `measure_env` measures, on one
environment (`arena bench sim` reports it; the definitions in full are in docs/bench-sim.md):

(a) Tool fidelity. The environment's twin is built as any imported catalogue is (`twin_of`: tool
specs -> `tools_from_json` -> `write_simulated_env` -> the loader). Each task's reference calls run
on a fresh real instance and, in order, on a `SimulatedInstance` of the twin (one `ToolMemory`
per trajectory). The task's facts (`check_values`, in `simulate.fidelity_facts`) are the values
its checks read: answer-check values, the literals of SQL and python checks, the arguments of
action checks and reference calls (0, 1 and one-character strings left out). A fact belongs to call
i when its real result shows it (`contains_value` over the result as JSON) and is reproduced when
the twin's result for call i is a success and shows it too; it is given when the call's arguments
or the intent hold it (the simulator can echo it), hidden otherwise. Tool fidelity = reproduced /
facts.

(b) Judge fidelity. As many gold episodes (reference calls with their real results, then the
reference answer; at most one per task) as non-working ones (per gold task, the adversary gate's
agent used least so far among those that apply to it), `episodes_per_kind` of each at most. Each
gets the verifier's verdict and the judge's (`TrajectoryJudge` with `simenv`'s criteria and
intent; no valid answer is a fail, counted in `judge_errors`). Tasks with rubric checks are left
out (their verifier is a judge). Rates and intervals are computed in `ops` (`ops.fidelity_report`),
which may import `curriculum.stats`.

(c) Cost. Per task whose gold episode was judged: seconds, helper calls and tokens of the simulated
episode (twin replay + judge) against the executable one (real replay + verifier).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, Field

from arena.env.loader import load_environment
from arena.env.runtime import Environment
from arena.tasks.adversary import ADVERSARIES, AdversaryName, play_agent, transcript_of
from arena.tasks.model import Task
from arena.tasks.normalize import contains_value
from arena.tasks.replay import first_failure, new_instance, replay_reference
from arena.tasks.toml_io import load_tasks
from arena.tasks.verify import verify
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec
from simulate.fidelity_facts import check_values, facts_in, result_text
from simulate.importers import tools_from_json, write_simulated_env
from simulate.simenv import SimulatedInstance, SimulationSettings, intent_of, task_criteria
from simulate.simulators.common import SimulatorError
from simulate.simulators.judge import TrajectoryJudge
from simulate.simulators.tool import ToolSimulator

log = structlog.get_logger(__name__)


class CountingModel:
    """Forwards `chat` to the helper and counts its calls, tokens and seconds (for the cost figures)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.name = getattr(model, "name", "helper")
        self.backend = getattr(model, "backend", type(model).__name__)
        self.calls = 0
        self.tokens = 0
        self.seconds = 0.0

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        started = time.perf_counter()
        try:
            completion = await self.model.chat(messages, tools=tools, params=params)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - started
        self.tokens += completion.usage.prompt_tokens + completion.usage.completion_tokens
        return completion


class FidelityConfig(BaseModel):
    """What one measurement covers and how the helper samples."""

    tasks: int = Field(default=5, ge=1, description="tasks per environment (the first usable ones)")
    episodes_per_kind: int = Field(default=5, ge=1, description="gold and non-working episodes per env")
    simulation: SimulationSettings = Field(default_factory=SimulationSettings)


class CallRecord(BaseModel):
    """One reference call, real and simulated, with the facts of its real result."""

    task: str
    index: int
    tool: str
    real_ok: bool
    sim_ok: bool
    sim_error: str = ""
    facts: list[str] = Field(default_factory=list)
    given: list[str] = Field(default_factory=list)  # the facts the call's arguments or intent hold
    reproduced: list[str] = Field(default_factory=list)


class JudgeRecord(BaseModel):
    """One executable episode: what the verifier and the judge said."""

    task: str
    kind: str  # "gold" or the non-working agent's name
    verifier_passed: bool
    judge_passed: bool
    judge_error: str = ""
    reward: float = 0.0


class CostRecord(BaseModel):
    """One task's episode, simulated (twin replay + judge) against executable (replay + verifier)."""

    task: str
    sim_seconds: float
    sim_tokens: int
    sim_helper_calls: int
    exec_seconds: float


class EnvFidelity(BaseModel):
    """Everything measured on one environment (raw records; the CLI turns them into rates)."""

    env: str
    tasks: list[str] = Field(default_factory=list)
    calls: list[CallRecord] = Field(default_factory=list)
    judge: list[JudgeRecord] = Field(default_factory=list)
    cost: list[CostRecord] = Field(default_factory=list)
    twin_dropped: list[str] = Field(default_factory=list)  # tools the importer's filter dropped
    notes: list[str] = Field(default_factory=list)


def twin_of(env: Environment, out_dir: Path) -> tuple[Environment, list[str]]:
    """The simulated twin of executable `env` written under `out_dir`, and the tools the filter dropped."""
    writes = set(env.write_tools)
    catalogue = {
        "tools": [
            {
                "name": s.name,
                "description": s.description,
                "inputSchema": s.parameters,
                "annotations": {"readOnlyHint": s.name not in writes},
            }
            for s in env.tool_specs
        ]
    }
    report = write_simulated_env(
        tools_from_json(catalogue),
        out_dir,
        name=env.name,
        title=env.title,
        category=list(env.category),
        description=env.description,
        rules=env.rules,
        source=f"twin of the executable environment {env.name}",
        now=env.now,
    )
    dropped = [f"{d.name}: {', '.join(d.reasons)}" for d in report.dropped]
    return load_environment(out_dir, cache=False), dropped


def compare_call(
    task: Task, index: int, real: Any, sim: Any | None, sim_error: str, values: list[str]
) -> CallRecord:
    """The facts of reference call `index`'s real result, and which of them the simulated one shows."""
    call = task.reference[index]
    facts = facts_in(real.output, values) if real.ok else []
    given_text = result_text(call.arguments) + "\n" + intent_of(task)
    sim_ok = sim is not None and sim.ok
    shown = facts_in(sim.output, facts) if sim_ok else []
    return CallRecord(
        task=task.id,
        index=index,
        tool=call.name,
        real_ok=real.ok,
        sim_ok=sim_ok,
        sim_error=sim_error or ("" if sim is None or sim.ok else str(sim.error)),
        facts=facts,
        given=[f for f in facts if contains_value(given_text, f)],
        reproduced=shown,
    )


def usable_tasks(env: Environment, limit: int, notes: list[str]) -> list[Task]:
    """The environment's first `limit` tasks without rubric checks (their verifier would be a judge)."""
    tasks = load_tasks(env.path, env.name, tools=env.tools)
    rubric = [t for t in tasks if t.needs_judge]
    if rubric:
        notes.append(f"{len(rubric)} task(s) with rubric checks left out")
    return [t for t in tasks if not t.needs_judge][:limit]


class _Episodes:
    """Runs executable episodes of one environment (fresh instance, calls, answer, verifier)."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    async def run(self, task: Task, calls: list[ToolCall], answer: str) -> tuple[Any, Any, list[Any]]:
        """(transcript, verdict, results) of an agent that makes `calls`, then answers `answer`."""
        instance = new_instance(self.env)
        try:
            results = [await instance.call(c.name, dict(c.arguments)) for c in calls]
            transcript = transcript_of(task, calls, results, answer)
            verdict = await verify(task, instance, transcript, env=self.env)
        finally:
            await instance.aclose()
        return transcript, verdict, results

    async def adversary(self, task: Task, agent: AdversaryName) -> tuple[Any, Any] | None:
        """(transcript, verdict) of a non-working agent on `task`, None when it does not apply."""

        async def score(instance: Any, transcript: Any) -> tuple[Any, Any]:
            return transcript, await verify(task, instance, transcript, env=self.env)

        played = await play_agent(self.env, task, agent, score)
        return None if played is None else played[1]


async def _judged(
    judge: TrajectoryJudge, task: Task, kind: str, transcript: Any, verdict: Any
) -> JudgeRecord:
    """The judge's verdict on one executable episode beside the verifier's (no valid answer: a fail)."""
    try:
        score = await judge.score(intent_of(task), transcript, task_criteria(task))
        passed, error = score.passed, ""
    except SimulatorError as exc:
        passed, error = False, str(exc)[:300]
    return JudgeRecord(
        task=task.id,
        kind=kind,
        verifier_passed=verdict.passed,
        judge_passed=passed,
        judge_error=error,
        reward=verdict.reward,
    )


async def _replay_on_twin(
    twin: Environment, simulator: ToolSimulator, task: Task, real: list[Any]
) -> list[CallRecord]:
    """The reference calls on a fresh simulated instance (one memory), compared with the real results."""
    instance = SimulatedInstance(twin, simulator, intent=intent_of(task))
    values = check_values(task)
    records = []
    try:
        for i, call in enumerate(task.reference):
            sim, error = None, ""
            try:
                sim = await instance.call(call.name, dict(call.arguments))
            except SimulatorError as exc:
                error = str(exc)[:300]
            records.append(compare_call(task, i, real[i], sim, error, values))
    finally:
        await instance.aclose()
    return records


async def measure_env(
    env: Environment,
    helper: Any,
    config: FidelityConfig,
    workdir: Path,
    *,
    tasks: list[Task] | None = None,
) -> EnvFidelity:
    """Measure tool fidelity, judge fidelity and cost on executable `env` (see the module docstring).

    `tasks` replaces the environment's own (its first `config.tasks` without rubric checks).
    """
    if env.kind != "executable":
        raise ValueError(f"environment {env.name!r} is {env.kind}, not executable")
    result = EnvFidelity(env=env.name)
    counting = helper if isinstance(helper, CountingModel) else CountingModel(helper)
    simulator = ToolSimulator(counting, config.simulation.tool)
    judge = TrajectoryJudge(counting, config.simulation.judge)
    twin, result.twin_dropped = twin_of(env, workdir / env.name)
    if tasks is None:
        tasks = usable_tasks(env, config.tasks, result.notes)
    golds: list[Task] = []
    for task in tasks:
        started = time.perf_counter()
        instance, real = await replay_reference(env, task)
        try:
            problem = first_failure(real)
            gold = transcript_of(task, list(task.reference), real, task.answer or "Done.")
            verdict = await verify(task, instance, gold, env=env)
        finally:
            await instance.aclose()
        exec_seconds = time.perf_counter() - started
        if problem is not None:
            result.notes.append(f"{task.id}: left out, {problem}")
            continue
        result.tasks.append(task.id)
        calls0, tokens0, sim_started = counting.calls, counting.tokens, time.perf_counter()
        result.calls.extend(await _replay_on_twin(twin, simulator, task, real))
        if len(golds) < config.episodes_per_kind:
            golds.append(task)
            result.judge.append(await _judged(judge, task, "gold", gold, verdict))
            result.cost.append(
                CostRecord(
                    task=task.id,
                    sim_seconds=time.perf_counter() - sim_started,
                    sim_tokens=counting.tokens - tokens0,
                    sim_helper_calls=counting.calls - calls0,
                    exec_seconds=exec_seconds,
                )
            )
    await _non_working(result, _Episodes(env), judge, golds)
    log.info("fidelity.env", env=env.name, tasks=len(result.tasks), helper_calls=counting.calls)
    return result


async def _non_working(
    result: EnvFidelity, episodes: _Episodes, judge: TrajectoryJudge, golds: list[Task]
) -> None:
    """As many non-working episodes as gold ones: per gold task, the least used agent that applies."""
    used: Counter[str] = Counter()
    n = len(ADVERSARIES)
    # Tasks that only read first: only the no-call agents apply there, which leaves the tasks that
    # write to the agents that call tools.
    writes = episodes.env.write_tools
    for i, task in enumerate(sorted(golds, key=lambda t: t.writes(writes))):
        # Ties go round: each task starts with another agent, so none is always tried last.
        for agent in sorted(ADVERSARIES, key=lambda a: (used[a], (ADVERSARIES.index(a) - i) % n)):
            episode = await episodes.adversary(task, agent)
            if episode is not None:
                result.judge.append(await _judged(judge, task, agent, *episode))
                used[agent] += 1
                break
