"""The daemon's side of cluster mode: a pool of episode workers on a Ray cluster.

The daemon stays the single owner of the round loop and of the store: it sends episodes in
batches of `cluster.batch_size` (task synthesis and TRAIN's rollouts one at a time) to the worker
with the fewest in flight, awaits the reply, and commits it. Failure handling
is ours, not Ray's: workers are created with `max_restarts=0`, so a lost node or killed process
surfaces at once as `RayActorError` on every call it held; those episodes go back to the queue
and run on another worker (nothing of theirs was committed), while a replacement worker is asked
for. Ray's own actor restarts would instead hold the calls until the actor could be placed again,
which on a cluster that lost a node may be never.

Replacements are placed without blocking anyone: the pool keeps their readiness references and
checks them whenever it picks a worker; one not ready after `worker_start_timeout_s` is killed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ops.cluster.worker import EpisodeWorker, WorkerReply
from work.jobs import BatchRunner, EpisodeJob, EpisodeResult, WorkItem

if TYPE_CHECKING:
    from ops.config import ArenaConfig
    from ops.metrics import Metrics

log = structlog.get_logger(__name__)


class ClusterUnavailable(RuntimeError):
    """No worker of the Ray cluster can take episodes (none alive, none could be placed)."""


@dataclass
class _Worker:
    actor: Any
    name: str
    in_flight: int = 0
    episodes: int = 0
    jobs: set[str] = field(default_factory=set)  # the jobs this worker has loaded


@dataclass
class _Starting:
    actor: Any
    ready: Any  # the ObjectRef of its `ready()` call
    since: float = field(default_factory=time.monotonic)


class WorkerPool:
    """Episode workers on one Ray cluster, with rescheduling of the episodes a lost worker held."""

    def __init__(self, config: ArenaConfig, metrics: Metrics | None = None) -> None:
        self.config = config
        self.cluster = config.cluster
        self.metrics = metrics
        self.workers: dict[str, _Worker] = {}
        self.starting: list[_Starting] = []
        self.lost: list[str] = []
        self.rescheduled = 0
        # Per finished episode: seconds between sending it and its reply, beyond the worker's own
        # time (dispatch, transfer, scheduling), and the worker's instance-creation time.
        self.overhead_s: deque[float] = deque(maxlen=1000)
        self.prepare_s: deque[float] = deque(maxlen=1000)
        self._remote: Any = None
        self._owns_ray = False
        self._changed = anyio.Event()

    # --- lifecycle ------------------------------------------------------------------------------

    async def connect(self) -> WorkerPool:
        """Join the cluster, ask for `cluster.workers` workers and wait for the first one to answer."""
        ray = _ray()
        if not ray.is_initialized():
            await anyio.to_thread.run_sync(self._init_ray, ray)
            self._owns_ray = True
        # Our own failover (see the module docstring), a slot per in-flight episode plus one for
        # `ready`, and SPREAD so two workers share a node only when there are fewer nodes.
        self._remote = ray.remote(EpisodeWorker).options(
            num_cpus=self.cluster.worker_cpus,
            max_restarts=0,
            max_concurrency=self._worker_limit(batched=True) + 1,
            scheduling_strategy="SPREAD",
        )
        for _ in range(self.cluster.workers):
            self._ask_for_worker()
        with anyio.move_on_after(self.cluster.connect_timeout_s):
            while not self.workers:
                self._admit_started(timeout=self.cluster.connect_timeout_s)
                if not self.workers:
                    await anyio.sleep(0.2)
        if not self.workers:
            why = (
                f"no episode worker started on the Ray cluster at {self.cluster.address} within "
                f"{self.cluster.connect_timeout_s:g}s (each needs {self.cluster.worker_cpus:g} CPU; "
                f"the cluster has {_cluster_cpus(ray)})"
            )
            await self.close()
            raise ClusterUnavailable(why)
        log.info("cluster.connected", address=self.cluster.address, workers=sorted(self.workers))
        self._publish_gauges()
        return self

    def _init_ray(self, ray: Any) -> None:
        ray.init(
            address=self.cluster.address,
            namespace=self.cluster.namespace,
            # Workers log to Ray's per-node files; their lines in the daemon's stdout would break
            # the daemon's one-JSON-object-per-line log stream.
            log_to_driver=False,
            logging_level=logging.WARNING,
        )

    async def close(self) -> None:
        """Stop every worker (their sandbox pools first) and leave the cluster if we joined it."""
        ray = _ray()
        handles = [w.actor for w in self.workers.values()] + [s.actor for s in self.starting]
        with anyio.move_on_after(10):
            for w in self.workers.values():
                with contextlib.suppress(Exception):  # a dead worker has nothing to close
                    await w.actor.shutdown.remote()
        for actor in handles:
            with contextlib.suppress(Exception):  # already gone
                ray.kill(actor)
        self.workers.clear()
        self.starting.clear()
        if self._owns_ray:
            await anyio.to_thread.run_sync(ray.shutdown)
            self._owns_ray = False

    # --- running episodes -----------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Single calls (rollouts, synthesis) the pool can have in flight: every planned worker at
        its concurrency."""
        return self.cluster.workers * self.cluster.worker_concurrency

    @property
    def episode_capacity(self) -> int:
        """Episodes in flight through `runner`: every worker's running ones plus one batch waiting
        there, so that a worker never idles while a reply and the next batch cross."""
        return self.cluster.workers * self._worker_limit(batched=True)

    def _worker_limit(self, *, batched: bool) -> int:
        """Episodes one worker may hold: its concurrency, and for batches room for one more batch
        than it runs at once (two when a batch alone fills it)."""
        concurrency, size = self.cluster.worker_concurrency, self.cluster.batch_size
        return max(concurrency, size) + size if batched else concurrency

    def runner(self, job: EpisodeJob, tasks: dict[str, dict[str, Any]]) -> BatchRunner:
        """A phase's runner: the items of `tasks` (task id -> stored task JSON) on the cluster, in
        batches of `cluster.batch_size`."""
        # The tasks cross once per worker with the job, not with every batch that runs one.
        job_ref = _ray().put(job.model_copy(update={"tasks": tasks}))

        async def run(items: list[WorkItem]) -> list[EpisodeResult]:
            bare = [item.model_copy(update={"task": {}}) if item.task else item for item in items]
            return await self._call("run", job.job_id, job_ref, bare, weight=len(items))

        return BatchRunner(run=run, size=self.cluster.batch_size)

    def rollouts(self, job: EpisodeJob) -> Any:
        """`send(task, request_model, serving) -> (transcript, verdict)`: TRAIN's episodes of `job`."""
        job_ref = _ray().put(job)

        async def send(task: dict[str, Any], request_model: str | None, serving: list[str] | None) -> Any:
            return await self._call("rollout", job.job_id, job_ref, task, request_model, serving)

        return send

    def synthesizer(self, job: EpisodeJob) -> Any:
        """`run(request) -> SynthesisOutcome`: task synthesis and its gates on the workers."""
        job_ref = _ray().put(job)

        async def run(request: Any) -> Any:
            return await self._call("synthesize", job.job_id, job_ref, request)

        return run

    async def _call(self, method: str, job_id: str, job_ref: Any, *args: Any, weight: int = 0) -> Any:
        """`method(job_id, *args)`'s result from the least busy worker (the job loaded there first).

        `weight`: the episodes of a batch (0: a single call). A worker lost mid-call only sends the
        call to another; its metrics are recorded here.
        """
        from ray.exceptions import RayActorError, RayTaskError

        while True:
            worker = await self._pick(weight)
            worker.in_flight += max(1, weight)
            sent = time.perf_counter()
            try:
                if job_id not in worker.jobs:
                    # The job (trainer settings, a policy object) crosses once per worker, not per episode.
                    await worker.actor.load_job.remote(job_ref)
                    worker.jobs.add(job_id)
                reply: WorkerReply = await getattr(worker.actor, method).remote(job_id, *args)
            except RayActorError as exc:
                self._lose(worker, exc)
                self.rescheduled += 1
                if self.metrics is not None:
                    self.metrics.cluster_rescheduled.inc()
                log.warning("cluster.episode_rescheduled", method=method, worker=worker.name)
                continue
            except RayTaskError as exc:
                # The episode itself failed (a model down, a bug): as in local mode, the phase fails.
                raise exc.as_instanceof_cause() from None
            finally:
                worker.in_flight -= max(1, weight)
                self._notify()
            worker.episodes += max(1, weight)
            # Per episode: a batch's episodes share its dispatch.
            self.overhead_s.append(max(0.0, time.perf_counter() - sent - reply.seconds) / max(1, weight))
            if reply.prepare_seconds is not None:
                self.prepare_s.append(reply.prepare_seconds)
            self._record(reply)
            return reply.result()

    async def _pick(self, weight: int) -> _Worker:
        # A batch may wait on a worker behind the episodes it runs; a single call may not.
        limit = self._worker_limit(batched=weight > 0)
        while True:
            self._admit_started()
            free = [w for w in self.workers.values() if w.in_flight + max(1, weight) <= limit]
            if free:
                return min(free, key=lambda w: (w.in_flight, w.episodes))
            if not self.workers and not self.starting:
                raise ClusterUnavailable(
                    f"every episode worker on {self.cluster.address} is lost ({', '.join(self.lost)}) "
                    "and no replacement could be placed"
                )
            with anyio.move_on_after(0.5):
                await self._changed.wait()

    def _lose(self, worker: _Worker, exc: BaseException) -> None:
        if self.workers.pop(worker.name, None) is None:
            return  # another of its calls already reported it
        self.lost.append(worker.name)
        log.error("cluster.worker_lost", worker=worker.name, error=str(exc).splitlines()[0][:300])
        self._ask_for_worker()
        self._publish_gauges()

    def _ask_for_worker(self) -> None:
        actor = self._remote.remote(self.config)
        self.starting.append(_Starting(actor=actor, ready=actor.ready.remote()))

    def _admit_started(self, timeout: float | None = None) -> None:
        """Move workers whose `ready()` answered into the pool; drop the ones that took too long."""
        if not self.starting:
            return
        ray = _ray()
        limit = self.cluster.worker_start_timeout_s if timeout is None else timeout
        done, _ = ray.wait([s.ready for s in self.starting], num_returns=len(self.starting), timeout=0)
        keep: list[_Starting] = []
        for s in self.starting:
            if s.ready in done:
                try:
                    info = ray.get(s.ready)
                except Exception as exc:  # it died while starting (its node went): ask again later
                    log.warning("cluster.worker_start_failed", error=str(exc).splitlines()[0][:300])
                    continue
                self.workers[info["worker"]] = _Worker(actor=s.actor, name=info["worker"])
                log.info("cluster.worker_ready", worker=info["worker"])
            elif time.monotonic() - s.since > limit:
                log.warning("cluster.worker_not_placed", waited_s=round(limit, 1))
                ray.kill(s.actor)
            else:
                keep.append(s)
        if len(keep) != len(self.starting) or done:
            self.starting = keep
            self._publish_gauges()
            self._notify()

    def _record(self, reply: WorkerReply) -> None:
        if self.metrics is None:
            return
        from simulate.calls import CallRecord

        for raw in reply.calls:
            self.metrics.observe_call(CallRecord.model_validate(raw))
        for attr, labels, increase in reply.counters:
            getattr(self.metrics, attr).labels(**labels).inc(increase)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _publish_gauges(self) -> None:
        if self.metrics is not None:
            self.metrics.cluster_workers.labels(state="ready").set(len(self.workers))
            self.metrics.cluster_workers.labels(state="starting").set(len(self.starting))

    async def workers_cpu_s(self) -> float:
        """The CPU seconds the ready workers' processes have used so far, all together."""
        answers = [await w.actor.ready.remote() for w in self.workers.values()]
        return sum(a["cpu_s"] for a in answers)

    # --- status ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Nodes, workers and rescheduled episodes, for `/status` and `arena status`."""
        ray = _ray()
        nodes = [
            {
                "node": n["NodeID"][:12],
                "address": n.get("NodeManagerAddress"),
                "alive": bool(n.get("Alive")),
                "cpus": n.get("Resources", {}).get("CPU", 0),
            }
            for n in ray.nodes()
        ]
        return {
            "backend": "ray",
            "address": self.cluster.address,
            "nodes": nodes,
            "workers": [
                {"worker": w.name, "in_flight": w.in_flight, "episodes": w.episodes}
                for w in sorted(self.workers.values(), key=lambda w: w.name)
            ],
            "workers_starting": len(self.starting),
            "workers_lost": list(self.lost),
            "episodes_rescheduled": self.rescheduled,
            "dispatch_overhead_ms_mean": _mean_ms(self.overhead_s),
            "instance_creation_ms_mean": _mean_ms(self.prepare_s),
        }


def _mean_ms(values: deque[float]) -> float | None:
    return round(1000 * sum(values) / len(values), 3) if values else None


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ClusterUnavailable(
            "cluster.backend = 'ray' needs Ray: pip install '.[cluster]' (or set cluster.backend = 'local')"
        ) from exc
    return ray


def _cluster_cpus(ray: Any) -> str:
    try:
        return f"{ray.cluster_resources().get('CPU', 0):g} CPU"
    except Exception:
        return "unknown resources"
