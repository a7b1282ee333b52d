"""Cluster mode on a real local Ray cluster: episodes on the workers, the store with the daemon.

The cluster is Ray's own: a head with no CPUs (so nothing runs beside the daemon) and two worker
nodes of one CPU each, all on this host (`ray.cluster_utils.Cluster` starts real raylets). The
daemon joins it by address, exactly as a deployed one does.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from arena.store import Store, check_integrity, repo
from ops.config import ConfigError
from ops.daemon import Daemon

from .test_round_e2e import tiny

ray = pytest.importorskip("ray", reason="cluster mode needs Ray: pip install '.[cluster]'")
# One xdist worker runs this module's tests back to back (`--dist loadgroup`), so its Ray cluster
# lives only while they run instead of idling beside the rest of the suite.
pytestmark = pytest.mark.xdist_group("ray-cluster")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A head (0 CPUs) and two one-CPU worker nodes on this host."""
    from ray.cluster_utils import Cluster

    # Ray binds this host's address (it rewrites 127.0.0.1 in a bootstrap address to it anyway).
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def cluster_config(make_config, ray_cluster) -> Any:
    """`cluster_config(database_url, **ARENA_*)`: a cluster-mode config joining the test's cluster."""

    def make(database: str, **env: str) -> Any:
        return make_config(
            ARENA_DATABASE_URL=database,
            ARENA_CLUSTER__BACKEND="ray",
            ARENA_RAY_ADDRESS=ray_cluster.address,
            **env,
        )

    return make


def test_cluster_mode_refuses_a_sqlite_store(make_config) -> None:
    with pytest.raises(
        ConfigError, match=r"cluster: backend = .ray. needs a PostgreSQL store.*the store is the SQLite file"
    ):
        make_config(ARENA_CLUSTER__BACKEND="ray")
    config = make_config(ARENA_CLUSTER__BACKEND="ray", ARENA_DATABASE_URL="postgresql://127.0.0.1/test")
    assert config.cluster.backend == "ray"
    assert make_config(ARENA_RAY_ADDRESS="10.0.0.1:6379").cluster.address == "10.0.0.1:6379"


@pytest.mark.anyio
async def test_a_cluster_without_room_for_a_worker_is_refused_naming_why(cluster_config, pg_database) -> None:
    from ops.cluster.pool import ClusterUnavailable, WorkerPool

    config = cluster_config(
        pg_database,
        ARENA_CLUSTER__WORKER_CPUS="8",
        ARENA_CLUSTER__CONNECT_TIMEOUT_S="3",
    )
    with pytest.raises(ClusterUnavailable, match=r"each needs 8 CPU; the cluster has 2 CPU"):
        await WorkerPool(config).connect()
    assert not ray.is_initialized()  # it left the cluster it joined


@pytest.mark.anyio
@pytest.mark.model
@pytest.mark.slow
async def test_a_round_in_cluster_mode_survives_a_worker_killed_mid_evaluate(
    cluster_config, embedded_model_path, fresh_pg_database, run_daemon
) -> None:
    config = cluster_config(
        fresh_pg_database,
        **{
            **tiny(embedded_model_path),
            # Enough episodes that both workers take some before one is killed and after.
            "ARENA_ROUND__EVAL_TASKS_PER_ENV": "2",
            "ARENA_ROUND__EVAL_SAMPLES_PER_TASK": "3",
            # The round's other phases run, but TRAIN has no step: its episodes on the workers are
            # the next test's (from the policy server), and the round e2e test trains in-process.
            "ARENA_ROUND__TRAIN_STEPS": "0",
        },
        ARENA_CLUSTER__WORKERS="2",
        ARENA_CLUSTER__WORKER_CONCURRENCY="1",
        # One episode per call, so that a worker is killed with an episode in flight while the
        # other has committed some (in batches the 6 episodes would be 2 calls).
        ARENA_CLUSTER__BATCH_SIZE="1",
    )
    daemon = Daemon(config, max_rounds=1, handle_signals=False)
    killed: str | None = None
    seen: dict[str, Any] = {}
    async with run_daemon(daemon) as client:
        with anyio.fail_after(900):
            while daemon.rounds_completed < 1 and not daemon.paused:
                pool = daemon.cluster
                if killed is None and pool is not None and daemon.phase == "evaluate":
                    victim = await _worker_to_kill(daemon)
                    if victim is not None:
                        # SIGKILL: no goodbye, as when a node's process is OOM-killed.
                        os.kill(int(victim.rsplit("/", 1)[1]), signal.SIGKILL)
                        killed = victim
                if killed is not None and not seen:
                    seen = (await client.get("/status", timeout=10)).json()["cluster"]
                await anyio.sleep(0.3)
        assert not daemon.paused, "the daemon paused itself: a phase failed (see phase.failed in the log)"
    assert killed is not None, "the evaluation ended before a worker could be killed mid-phase"
    assert seen["backend"] == "ray" and len([n for n in seen["nodes"] if n["alive"]]) == 3
    assert pool.rescheduled >= 1 and killed in pool.lost
    exposition = daemon.metrics.exposition().decode()
    assert "arena_cluster_rescheduled_episodes_total" in exposition
    async with Store(fresh_pg_database) as store, store.transaction() as s:
        episodes = await repo.episodes_for_round(s, 1, purpose="eval")
        report = await check_integrity(s)
        round_row = await repo.last_completed_round(s)
    assert report.ok, report.problems
    assert round_row is not None and round_row.round == 1
    # Every planned episode once (the key is unique, and none is missing), each from a worker.
    keys = sorted((e.task_id, e.sample_idx) for e in episodes)
    assert len(keys) == len(set(keys)) == 2 * 3, keys
    workers = {e.worker for e in episodes}
    assert killed in workers, "the killed worker had committed episodes before it died"
    assert len(workers) >= 2 and all(w and w != "local" for w in workers)
    nodes = {w.split("/")[0] for w in workers}
    assert len(nodes) == 2, f"episodes ran on both worker nodes: {workers}"
    # Workers send transcripts as JSON text; the store holds the documents themselves.
    assert all(isinstance(e.transcript, dict) and e.transcript.get("messages") for e in episodes)


async def _worker_to_kill(daemon: Daemon) -> str | None:
    """A worker with an episode in flight that has already committed one (None: not yet)."""
    async with daemon.store.transaction() as s:
        committed = {e.worker for e in await repo.episodes_for_round(s, daemon.round or 1, purpose="eval")}
    pool = daemon.cluster
    for worker in list(pool.workers.values()):
        others = [w for w in pool.workers.values() if w is not worker]
        if (
            worker.name in committed
            and worker.in_flight
            and others
            and any(w.name in committed for w in others)
        ):
            return worker.name
    return None


@pytest.mark.anyio
async def test_a_worker_samples_only_the_replicas_the_daemon_keeps_serving(make_config, tmp_path) -> None:
    """A replica the daemon dropped (a failed publish) is out on the worker too, and the worker never
    lets a replica back by itself: only the daemon gives a returning replica the live weights."""
    from ops.cluster.worker import EpisodeWorker
    from ops.metrics import Metrics
    from ops.models import ModelHub
    from simulate.replicas import find_shared_pool

    urls = ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]
    config = make_config(
        ARENA_MODELS__POLICY__BACKEND="http",
        ARENA_MODELS__POLICY__BASE_URL=urls[0],
        ARENA_MODELS__POLICY__REPLICA_URLS=urls[1],
        ARENA_TRAINER__BASE_MODEL=str(tmp_path),
    )
    worker = EpisodeWorker.__new__(EpisodeWorker)  # the actor's state without a Ray runtime
    worker.config, worker.models = config, ModelHub(config, Metrics())
    await worker._use_replicas([urls[0]])
    pool = find_shared_pool(config.models.policy.urls)
    assert pool is not None
    assert [r.serving for r in pool.replicas] == [True, False]
    with pytest.raises(RuntimeError, match="returns when the daemon has given it the live weights"):
        await pool.restore(pool.replicas[1].url)
    await worker._use_replicas(urls)  # the daemon restored it: the next job says so
    assert [r.serving for r in pool.replicas] == [True, True]


@pytest.mark.anyio
async def test_a_worker_runs_a_jobs_episodes_with_its_own_models_and_environments(
    make_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker has no phase context and no store: it loads the job's environments from its own
    configuration and runs each episode through an `EpisodeKit` of its own models (`work.kit`)."""
    import ops.cluster.worker as worker_module
    from ops.cluster.bench import bench_tasks
    from ops.cluster.worker import EpisodeWorker
    from ops.phases.runtime import trainer_config
    from simulate.scripted_reference import ScriptedReferencePolicy
    from trainer.rollout import episode_view
    from work.jobs import EpisodeJob, EpisodeResult, WorkItem

    monkeypatch.setattr(worker_module, "_node_id", lambda: "node-without-ray")  # no Ray runtime here
    config = make_config()
    _, tasks = bench_tasks(["library"])
    task = tasks[0]
    worker = EpisodeWorker(config)
    assert not hasattr(worker, "_context") and "store" not in vars(worker)
    job = EpisodeJob(
        round=1,
        phase="evaluate",
        view=episode_view(trainer_config(config, 1, temperature=0.0)),
        policy=ScriptedReferencePolicy([task]),  # the reference, replayed: the episode passes
        tasks={task.full_id: task.model_dump(mode="json")},
    )
    await worker.load_job(job)
    item = WorkItem(task_id=task.full_id, env=task.env, sample_idx=0)
    reply = await worker.run(job.job_id, [item, item.model_copy(update={"sample_idx": 1})])
    results = reply.result()
    assert [type(r) for r in results] == [EpisodeResult, EpisodeResult]
    assert all(r.passed and r.worker.startswith("node-without") for r in results)
    assert isinstance(results[0].transcript, str)  # sent as JSON text, as a Ray reply is
    assert worker.episodes == 2 and reply.prepare_seconds is not None


def test_bench_scale_measures_local_and_one_and_two_workers(ray_cluster, capsys) -> None:
    """The bench's figures come from real runs: every scripted-reference episode passes in every mode."""
    import json

    from ops.cli import main

    argv = ["bench", "scale", "--address", ray_cluster.address, "--no-model", "--episodes", "12"]
    argv += ["--batch-size", "3", "--repeat", "2", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    runs = {(r["mode"], r["workers"]): r for r in report["runs"]}
    assert set(runs) == {("local", 1), ("ray", 1), ("ray", 2)}
    for run in runs.values():
        assert run["policy"] == "scripted-reference-fake" and run["episodes"] == 12
        assert run["episodes_per_s"] > 0 and run["daemon_cpu_ms_per_episode"] > 0
        assert len(run["repeats"]) == 2 and run["episodes_per_s"] == min(run["repeats"])  # median_low of 2
    # The same work in every mode: replaying the references passes the same episodes wherever they run.
    assert len({r["passed"] for r in runs.values()}) == 1 and runs[("local", 1)]["passed"] >= 10
    assert runs[("ray", 1)]["dispatch_overhead_ms"] is not None and runs[("ray", 2)]["batch_size"] == 3
    assert all(runs[("ray", n)]["worker_cpu_ms_per_episode"] > 0 for n in (1, 2))
    assert report["speedup_2_workers_over_1"]["scripted-reference-fake"] > 0
    assert len(report["speedup_each_repeat"]["scripted-reference-fake"]) == 2
    assert report["store"] == "sqlite" and "PostgreSQL" in report["notes"][0]


@pytest.mark.anyio
@pytest.mark.model
@pytest.mark.slow
async def test_grpo_rollouts_from_the_policy_server_run_on_the_workers_token_exact(
    cluster_config, embedded_model_path, pg_database, phase_context, tmp_path
) -> None:
    """TRAIN in cluster mode: the workers sample the episodes from the policy server the trainer
    publishes to (one token chain each, with the server's log-probs); the step trains on them here."""
    from arena.env.registry import Registry
    from ops.cluster.pool import WorkerPool
    from ops.cluster.rollouts import cluster_rollouts
    from simulate.local import LocalChatModel
    from simulate.serve import create_app, serving
    from trainer.grpo import train_round
    from trainer.publish import HttpWeightPublisher

    from ..trainer.tiny import letters_task, tiny_config

    served = LocalChatModel.load(embedded_model_path, device="cpu", dtype="float32")
    submit, turns_served = served.batcher.submit, []

    async def counting_submit(*args: Any, **kwargs: Any) -> Any:
        turns_served.append(1)
        return await submit(*args, **kwargs)

    served.batcher.submit = counting_submit  # type: ignore[method-assign]
    config = cluster_config(
        pg_database,
        ARENA_CLUSTER__WORKERS="2",
        ARENA_CLUSTER__WORKER_CONCURRENCY="2",
    )
    seen: list[Any] = []
    async with serving(create_app(served, name="policy", allow_reload=True)) as url:
        pool = await WorkerPool(config).connect()
        try:
            ctx = phase_context(config, phase="train")
            ctx.cluster = pool
            # Groups of 6: a group of 4 that scores alike (it happens) is dropped and has no ratios.
            tconf = tiny_config(
                max_steps=1, group_size=6, rollout_backend="http", rollout_base_url=url + "/v1"
            )
            task = letters_task()
            envs = Registry([]).load_all()
            remote = cluster_rollouts(ctx, envs, [task], tconf, str(embedded_model_path))
            result = await train_round(
                0,
                [task],
                embedded_model_path,
                tmp_path / "out",
                tconf,
                seen.append,
                publisher=HttpWeightPublisher(url, tmp_path / "shared"),
                remote_episodes=remote,
            )
            per_worker = {w.name: w.episodes for w in pool.workers.values()}
        finally:
            await pool.close()
    assert result.steps == 1 and result.episodes == 6 and result.chain_breaks == 0
    # Every episode ran on a worker, both took some, and every policy turn came from the server.
    assert sum(per_worker.values()) == 6 and len(per_worker) == 2 and all(per_worker.values())
    assert len(turns_served) >= 6
    # The sampler's log-probs crossed with the chains: the step's importance ratios sit near 1.
    (step,) = seen
    assert step.importance_ratio_mean is not None and 0.9 < step.importance_ratio_mean < 1.1


@pytest.mark.anyio
async def test_synthesis_and_its_gates_run_on_the_workers_with_the_tasks_of_local_mode(
    cluster_config, fresh_pg_database, phase_context
) -> None:
    """SYNTHESIZE's requests run on both workers, several environments at once; being deterministic
    in their seeds, they give exactly the tasks local mode gives, and the daemon records the gates
    and stores the tasks."""
    from arena.synth.targeted import Guideline
    from ops.cluster.pool import WorkerPool
    from ops.phases.runtime import load_envs
    from ops.phases.synth_dispatch import request_runner, synthesize_for_envs
    from ops.phases.synth_requests import graph_request, run_request
    from ops.phases.synth_site import SynthesisSite
    from ops.phases.tasks import stored_tasks

    config = cluster_config(
        fresh_pg_database,
        ARENA_CLUSTER__WORKERS="2",
        ARENA_CLUSTER__WORKER_CONCURRENCY="2",
    )
    async with Store(fresh_pg_database) as store:
        await store.migrate()
        ctx = phase_context(config, store, phase="synthesize")
        envs = load_envs(ctx)
        names = ["banking", "library", "calendar"]
        guideline = Guideline(env="library", failure_pattern="renews the wrong loan", n_tasks=2)
        requests = {
            name: [graph_request(ctx, name, 3, seed=11, difficulty=None, with_helper=False)] for name in names
        }
        requests["library"].append(
            graph_request(ctx, "library", 2, seed=11, guideline=guideline, with_helper=False)
        )
        expected = {
            name: [t for r in batch for t in (await run_request(SynthesisSite.of(ctx), envs, r, None)).tasks]
            for name, batch in requests.items()
        }
        pool = await WorkerPool(config, ctx.metrics).connect()
        try:
            ctx.cluster = pool
            assert request_runner(ctx, envs, None)[1] == 4  # every worker at its concurrency
            made, reports = await synthesize_for_envs(ctx, envs, requests, None)
            per_worker = {w.name: w.episodes for w in pool.workers.values()}
        finally:
            await pool.close()
        stored = await stored_tasks(ctx, names, ("graph", "targeted"))
    assert made == expected and all(made[name] for name in names)
    assert any(t.origin == "targeted" for t in made["library"])
    assert len(per_worker) == 2 and all(per_worker.values()) and sum(per_worker.values()) == 4
    assert [r["env"] for r in reports] == ["banking", "library", "library", "calendar"]
    accepted = ctx.metrics.synthesis_gate.labels(gate="gold", result="accepted")._value.get()
    assert accepted >= sum(len(v) for v in made.values())
    assert {n: sorted(t.id for t in v) for n, v in stored.items()} == {
        n: sorted(t.id for t in v) for n, v in made.items()
    }


def test_a_workers_counters_reach_the_daemons_metrics_once() -> None:
    """Gate verdicts and sandbox kills counted on a worker are added to the daemon's counters, each
    increase once (the next reply carries only what was counted since)."""
    from ops.cluster.pool import WorkerPool
    from ops.cluster.worker import FORWARDED_COUNTERS, EpisodeWorker
    from ops.metrics import Metrics

    worker = EpisodeWorker.__new__(EpisodeWorker)  # the actor's state without a Ray runtime
    worker.metrics, worker._counted, worker._calls, worker.episodes = Metrics(), {}, [], 0
    worker._pool = None
    daemon = WorkerPool.__new__(WorkerPool)
    daemon.metrics = Metrics()
    worker.metrics.synthesis_gate.labels(gate="sim_judge", result="rejected").inc(3)
    worker.metrics.tasks_synthesized.labels(origin="simulated").inc(2)
    daemon._record(worker._reply(None, 0.0, counters=FORWARDED_COUNTERS))  # a synthesis reply
    worker.metrics.sandbox_kills.labels(reason="timeout").inc()
    daemon._record(worker._reply(None, 0.0))  # an episode without a sandbox pool: not looked at
    assert daemon.metrics.sandbox_kills.labels(reason="timeout")._value.get() == 0
    worker._pool = object()
    daemon._record(worker._reply(None, 0.0))  # with a pool, an episode's reply carries its kills
    daemon._record(worker._reply(None, 0.0, counters=FORWARDED_COUNTERS))
    got = daemon.metrics
    assert got.synthesis_gate.labels(gate="sim_judge", result="rejected")._value.get() == 3
    assert got.tasks_synthesized.labels(origin="simulated")._value.get() == 2
    assert got.sandbox_kills.labels(reason="timeout")._value.get() == 1


@pytest.mark.anyio
async def test_a_worker_that_cannot_be_placed_is_dropped_after_its_start_timeout(
    cluster_config, pg_database
) -> None:
    """Three workers asked of a cluster with room for two: the third waits for a node, and after
    `cluster.worker_start_timeout_s` it is given up (killed, not left pending forever); the daemon
    joins in its own `cluster.namespace`."""
    from ops.cluster.pool import WorkerPool

    config = cluster_config(
        pg_database,
        ARENA_CLUSTER__NAMESPACE="arena-start-timeout",
        ARENA_CLUSTER__WORKERS="3",
        ARENA_CLUSTER__WORKER_START_TIMEOUT_S="12",
    )
    asked = time.monotonic()
    pool = await WorkerPool(config).connect()
    try:
        assert ray.get_runtime_context().namespace == "arena-start-timeout"
        with anyio.fail_after(11):
            while len(pool.workers) < 2:
                pool._admit_started()
                await anyio.sleep(0.2)
        assert len(pool.starting) == 1  # no third CPU for it, and not yet given up
        await anyio.sleep(asked + 12.5 - time.monotonic())
        pool._admit_started()
        assert pool.starting == [] and len(pool.workers) == 2
        assert pool.status()["workers_starting"] == 0
    finally:
        await pool.close()


def test_the_batch_size_sets_how_many_episodes_a_worker_holds(make_config) -> None:
    """`cluster.batch_size`: a worker holds what it runs plus one batch (two when a batch alone
    fills it), and single calls (rollouts, synthesis) stay at its concurrency."""
    from ops.cluster.pool import WorkerPool

    def pool(**env: str) -> WorkerPool:
        base = {"ARENA_DATABASE_URL": "postgresql://127.0.0.1/test", "ARENA_CLUSTER__BACKEND": "ray"}
        return WorkerPool(
            make_config(**base, ARENA_CLUSTER__WORKERS="2", ARENA_CLUSTER__WORKER_CONCURRENCY="4", **env)
        )

    assert pool(ARENA_CLUSTER__BATCH_SIZE="1").episode_capacity == 2 * (4 + 1)
    assert pool(ARENA_CLUSTER__BATCH_SIZE="4").episode_capacity == 2 * (4 + 4)
    assert pool(ARENA_CLUSTER__BATCH_SIZE="16").episode_capacity == 2 * (16 + 16)
    assert {pool(ARENA_CLUSTER__BATCH_SIZE=n).capacity for n in ("1", "16")} == {8}


def test_a_workers_reply_carries_what_ray_would_and_is_compressed() -> None:
    """Replies are packed as Ray itself would serialize them (cloudpickle: run-time classes and
    functions too), and a batch of transcripts shrinks well below Ray's 100 KB inline limit."""
    from ops.cluster.worker import WorkerReply
    from work.jobs import EpisodeResult

    transcript = {"messages": [{"role": "tool", "content": f"row {i}: ok"} for i in range(400)]}
    batch = [EpisodeResult(reward=1.0, passed=True, transcript=transcript).as_json_text() for _ in range(32)]
    reply = WorkerReply(packed=WorkerReply.pack(batch))
    assert reply.result() == batch
    assert len(reply.packed) < 100_000 < sum(len(r.transcript) for r in batch)

    def made_at_run_time(x: int) -> int:
        return x + 1

    assert WorkerReply(packed=WorkerReply.pack(made_at_run_time)).result()(1) == 2
