"""The episode worker: a Ray actor that runs the daemon's episodes on a cluster node.

Each worker holds what an episode needs near it: its own model clients (vLLM replicas over HTTP
in production, the embedded model in a try-out), the environments as loaded from the shared
configuration, and its own sandbox pool (sandbox workers are per node: they never cross machines).
It runs an episode exactly as the daemon would: an `EpisodeKit` of those (`work.kit`) runs it
through `work.episode.run_and_verify`. It has no phase context and never opens the store: the
daemon commits what it returns, so a worker lost mid-episode loses only that episode, which the
daemon runs again.

Workers also run task synthesis and its gates (`synthesize`, `ops.phases.synth_requests`, given a
`SynthesisSite` of the worker's own models, metrics and settings).
Model-call records and the counters in `FORWARDED_COUNTERS` (sandbox kills, gate verdicts) made
here go back with each result, and the daemon feeds them into its own metrics: Prometheus keeps
one scrape target, the daemon.

Direction: the worker imports the work it runs (`work`, `ops.phases.synth_requests`,
`ops.cluster.rollouts`) and what it is sent (`work.jobs`), and none of those imports it back.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import time
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, Field

from ops.cluster.serving import follow_daemon
from work.jobs import EpisodeJob, Runner, WorkItem

log = structlog.get_logger(__name__)


class WorkerReply(BaseModel):
    """One call's result plus the metrics the worker recorded while running it."""

    # The result (`run`: a batch's `EpisodeResult`s; `rollout`: TRAIN's (transcript, verdict);
    # `synthesize`: a `SynthesisOutcome`) as a zlib-compressed pickle. Transcripts shrink about 6x:
    # a batch's reply stays under Ray's inline limit (100 KB) instead of crossing through the
    # object store, whose transfers cost the raylets ~0.2 ms of CPU per episode (`arena bench
    # scale`), and between machines it is that much less to send.
    packed: bytes
    seconds: float = 0.0  # the call on the worker, from its arrival to its reply
    prepare_seconds: float | None = None  # `run`: preparing a task, per episode (once per job and task)
    calls: list[dict[str, Any]] = Field(default_factory=list)
    # (Metrics attribute, labels, increase) of the counters in FORWARDED_COUNTERS since the last reply.
    counters: list[tuple[str, dict[str, str], float]] = Field(default_factory=list)

    @staticmethod
    def pack(result: Any) -> bytes:
        """`result` as `packed` holds it (level 1: most of the size for a fraction of the CPU).

        Ray's cloudpickle, as Ray itself would serialize the result: it also takes what the standard
        pickle refuses (classes and functions defined at run time); its output loads with `pickle`.
        """
        from ray import cloudpickle

        return zlib.compress(cloudpickle.dumps(result, protocol=5), 1)

    def result(self) -> Any:
        """The call's result."""
        return pickle.loads(zlib.decompress(self.packed))


# The worker's counters the daemon adds to its own (model calls come as `calls` records instead).
FORWARDED_COUNTERS = ("sandbox_kills", "synthesis_gate", "tasks_synthesized")


@dataclass
class _JobState:
    job: EpisodeJob
    envs: dict[str, Any]
    runners: dict[str, Runner] = field(default_factory=dict)  # task id -> its prepared episode runner
    prepared: dict[str, Any] = field(default_factory=dict)  # task id -> PreparedTask (rollouts)
    rollout_policy: Any = None  # the token-exact policy-server client of TRAIN's rollouts


class EpisodeWorker:
    """Runs episodes of the daemon's phases (wrapped with `ray.remote` by `ops.cluster.pool`)."""

    def __init__(self, config: Any) -> None:
        from ops.logging import configure_logging
        from ops.metrics import Metrics
        from ops.models import ModelHub

        # The daemon's level and format ("auto" is JSON: stdout here is Ray's per-worker log file,
        # named after the worker's pid).
        configure_logging(config.logging.level, config.logging.format)
        self.config = config
        self.metrics = Metrics()
        self.models = ModelHub(config, self.metrics)
        self.name = f"{_node_id()[:12]}/{os.getpid()}"
        self.episodes = 0
        self._calls: list[Any] = []
        self._counted: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._jobs: OrderedDict[str, _JobState] = OrderedDict()
        self._pool: Any = None
        self._pool_task: asyncio.Task[None] | None = None
        self._pool_ready: asyncio.Event | None = None
        self._observing = False
        self._running: asyncio.Semaphore | None = None

    async def ready(self) -> dict[str, Any]:
        """Who and where this worker is (the pool awaits it before sending episodes)."""
        return {
            "worker": self.name,
            "node": _node_id(),
            "pid": os.getpid(),
            "episodes": self.episodes,
            "cpu_s": time.process_time(),  # this process's CPU so far (`arena bench scale`)
        }

    async def load_job(self, job: EpisodeJob) -> None:
        """Keep `job` and its environments for the episodes that name it (sent once per worker)."""
        from ops.phases.runtime import load_environments

        if job.job_id not in self._jobs:
            # Loaded per job, so that environments SYNTHESIZE grew since the worker started are seen.
            envs = load_environments(self.config, self.metrics, sandbox_available=job.sandbox_available)
            self._jobs[job.job_id] = _JobState(job=job, envs=envs)
            while len(self._jobs) > 4:  # a phase's batches; older jobs are done
                self._jobs.popitem(last=False)

    async def run(self, job_id: str, items: list[WorkItem]) -> WorkerReply:
        """Run a batch of episodes of a loaded job's tasks, at most `cluster.worker_concurrency` at
        once across calls; reply when all are done."""
        started = time.perf_counter()
        state = self._job(job_id)
        job = state.job
        if job.policy is not None:
            self.models.set("policy", job.policy)
        else:
            self._use_weights(job.policy_weights)
            await self._use_replicas(job.policy_replicas)
        for item in items:
            if item.env not in state.envs:
                raise LookupError(
                    f"worker {self.name} has no environment {item.env!r} (DATA_DIR not shared?)"
                )
            if item.task_id not in job.tasks:
                raise LookupError(f"job {job_id} has no task {item.task_id!r}")
        async with self._sandbox(job.needs_sandbox) as pool:
            done = await asyncio.gather(
                *(self._run_one(state, item, job.tasks[item.task_id], pool) for item in items)
            )
        results = [result for result, _ in done]
        prepare = sum(seconds for _, seconds in done) / max(1, len(items))
        return self._reply(results, started, prepare, episodes=len(items))

    async def _run_one(
        self, state: _JobState, item: WorkItem, task: dict[str, Any], pool: Any
    ) -> tuple[Any, float]:
        """One episode of a batch and the seconds spent preparing its task (0 once prepared)."""
        from arena.tasks.model import Task
        from work.kit import episode_kit, episode_runner

        async with self._slots():
            started = time.perf_counter()
            runner = state.runners.get(item.task_id)
            if runner is None:
                if state.job.view is None:
                    raise ValueError(f"job {state.job.job_id} names no episode view: it runs no episodes")
                tasks = [Task.model_validate(task)]
                kit = await episode_kit(self.models, state.envs, tasks, pool)
                runner, runnable, skipped = await episode_runner(kit, tasks, state.job.view)
                if item.task_id not in runnable:
                    raise RuntimeError(f"task {item.task_id} could not be prepared on {self.name}: {skipped}")
                state.runners[item.task_id] = runner
            prepared = time.perf_counter() - started
            result = await runner(item)
        return result.model_copy(update={"worker": self.name}).as_json_text(), prepared

    def _slots(self) -> asyncio.Semaphore:
        # Episodes running at once on this worker, whatever number of batches it holds.
        if self._running is None:
            self._running = asyncio.Semaphore(self.config.cluster.worker_concurrency)
        return self._running

    async def rollout(
        self, job_id: str, task: dict[str, Any], request_model: str | None, serving: list[str] | None
    ) -> WorkerReply:
        """One of TRAIN's GRPO episodes against the policy server, token-exact (`ops.cluster.rollouts`)."""
        from ops.cluster.rollouts import run_rollout

        started = time.perf_counter()
        state = self._job(job_id)
        async with self._sandbox(state.job.needs_sandbox) as pool:
            episode = await run_rollout(state, self.models, task, request_model, serving, pool)
        return self._reply(episode, started)

    async def synthesize(self, job_id: str, request: Any) -> WorkerReply:
        """Run one `SynthesisRequest` (graph tasks through their gates, or simulated tasks) here."""
        from ops.phases.synth_requests import run_request
        from ops.phases.synth_site import SynthesisSite, no_safe_point

        started = time.perf_counter()
        state = self._job(job_id)
        env = state.envs.get(request.env)
        site = SynthesisSite(
            round=state.job.round,
            models=self.models,
            metrics=self.metrics,
            synthesis=self.config.synthesis,
            safe_point=no_safe_point,  # pause and stop are the daemon's: it stops sending requests
        )
        async with self._sandbox(env is not None and env.sandboxed) as pool:
            outcome = await run_request(site, state.envs, request, pool)
        return self._reply(outcome, started, counters=FORWARDED_COUNTERS)

    def _job(self, job_id: str) -> _JobState:
        """A loaded job; the model-call observer is installed before this worker's first episode."""
        if job_id not in self._jobs:
            raise LookupError(f"worker {self.name} has no job {job_id} (load_job first)")
        if not self._observing:
            from simulate.calls import add_observer

            add_observer(self._calls.append)
            self._observing = True
        return self._jobs[job_id]

    def _reply(
        self,
        result: Any,
        started: float,
        prepare_seconds: float | None = None,
        *,
        episodes: int = 1,
        counters: tuple[str, ...] | None = None,
    ) -> WorkerReply:
        """`result` with the model calls and forwarded counters recorded since the last reply.

        `counters`: the families that may have moved (collecting one costs ~0.15 ms, so an episode
        reply looks at the sandbox kills only when this worker has a sandbox pool).
        """
        self.episodes += episodes
        calls, self._calls[:] = [c.model_dump() for c in self._calls], []
        if counters is None:
            counters = ("sandbox_kills",) if self._pool is not None else ()
        return WorkerReply(
            packed=WorkerReply.pack(result),
            seconds=time.perf_counter() - started,
            prepare_seconds=prepare_seconds,
            calls=calls,
            counters=self._counter_increases(counters),
        )

    async def shutdown(self) -> None:
        """Close the sandbox pool (its worker processes) before the actor goes."""
        if self._pool_task is not None:
            self._pool_task.cancel()
            await asyncio.gather(self._pool_task, return_exceptions=True)

    def _use_weights(self, weights: str | None) -> None:
        wanted = Path(weights) if weights else None
        if wanted != self.models.policy_weights:
            # A new round's policy: the local backend must load it (HTTP replicas got it published).
            self.models.policy_weights = wanted
            self.models.forget("policy")

    async def _use_replicas(self, serving: list[str] | None) -> None:
        """Sample only from the replicas the daemon keeps serving the live weights.

        The daemon's pool drops a replica that could not load a publish and restores one that
        returns; this worker's pool cannot know either. So here a replica is serving exactly when
        the daemon's is, and one whose connection breaks stays out until the daemon's next job
        says it serves again: a restarted vLLM holds its starting weights, not the policy's.
        """
        if serving is None:
            return
        from simulate.replicas import find_shared_pool

        await self.models.policy()  # builds the client, and so the process's pool of its replicas
        follow_daemon(find_shared_pool(self.config.models.policy.urls), serving)

    @asynccontextmanager
    async def _sandbox(self, needed: bool) -> AsyncIterator[Any]:
        if not needed:
            yield None
            return
        if self._pool_task is None or self._pool_task.done():
            # The pool lives in a task of its own: its task group must be entered and left by one task,
            # and it serves every episode of this worker until the actor goes.
            self._pool_ready = asyncio.Event()
            self._pool_task = asyncio.get_running_loop().create_task(self._hold_pool())
        assert self._pool_ready is not None
        await self._pool_ready.wait()
        if self._pool is None:
            raise RuntimeError(f"worker {self.name} could not start its sandbox pool")
        yield self._pool

    async def _hold_pool(self) -> None:
        from ops.phases.runtime import open_sandbox_pool

        assert self._pool_ready is not None
        try:
            async with open_sandbox_pool(self.config.sandbox, self.metrics) as pool:
                self._pool = pool
                self._pool_ready.set()
                await asyncio.Event().wait()
        finally:
            self._pool = None
            self._pool_ready.set()

    def _counter_increases(self, families: tuple[str, ...]) -> list[tuple[str, dict[str, str], float]]:
        now = {
            (attr, tuple(sorted(sample.labels.items()))): sample.value
            for attr in families
            for metric in getattr(self.metrics, attr).collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        }
        increases = [
            (attr, dict(labels), value - self._counted.get((attr, labels), 0.0))
            for (attr, labels), value in now.items()
            if value > self._counted.get((attr, labels), 0.0)
        ]
        self._counted |= now
        return increases


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()
