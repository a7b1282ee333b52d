"""Several model server replicas behind one client (`simulate.replicas`).

The pool's rules against mock servers (no model, a fake clock where cool-downs matter), the
configuration of several URLs, the readiness probe; then the acceptance test against two real
`arena serve-model` processes: one is killed mid-phase, the phase completes on the other, and it
rejoins when it is back; and a replica that comes back after a publish serves the published weights.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from arena.types import Message, SamplingParams
from ops.config import ConfigError, load_config
from simulate.backends import build_chat_model
from simulate.http import HttpChatModel
from simulate.model_errors import ModelRequestError, ModelUnavailable
from simulate.replicas import ReplicaPool, find_shared_pool, shared_pool

pytestmark = pytest.mark.anyio

OK_BODY = {
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
}
HI = [Message(role="user", content="hi")]
A, B, C = "http://a.test", "http://b.test", "http://c.test"
TRAINER = '[trainer]\nbase_model = "/srv/models/policy"\n'  # an http policy needs its starting weights


class ScriptedFleet:
    """A mock transport for several hosts; each answers as its `mode` says and is counted.

    Modes: "ok", "500", "400", "down" (connection refused). `models` is what `GET /v1/models`
    answers with (status), separately from the mode, so a server can be up but not ready.
    """

    def __init__(self, *hosts: str) -> None:
        self.mode = {h: "ok" for h in hosts}
        self.models = dict.fromkeys(hosts, 200)
        self.attempts: list[str] = []  # host of every request, refused connections included
        self.chats: list[str] = []  # host of each chat request that reached a server
        self.probes: list[str] = []
        self.events: list[str] = []  # chats and probes in order, "chat a.test" / "probe a.test"

    def handle(self, request: httpx.Request) -> httpx.Response:
        host = f"{request.url.scheme}://{request.url.host}"
        self.attempts.append(host)
        if self.mode[host] == "down":
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path == "/v1/models":
            self.probes.append(host)
            self.events.append(f"probe {request.url.host}")
            return httpx.Response(self.models[host], json={"data": [{"id": "m"}]})
        self.chats.append(host)
        self.events.append(f"chat {request.url.host}")
        if self.mode[host] == "500":
            return httpx.Response(500, json={"error": {"message": "boom"}})
        if self.mode[host] == "400":
            return httpx.Response(400, json={"error": {"message": "prompt too long"}})
        return httpx.Response(200, json=OK_BODY)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


def fleet_client(fleet: ScriptedFleet, *hosts: str, clock: Any = None, **kwargs: Any) -> HttpChatModel:
    """A client of `hosts` whose backoff would be obvious (30 s) if a test ever slept it."""
    options: dict[str, Any] = {"retries": 3, "backoff_s": 30.0, "backoff_max_s": 30.0, "breaker_threshold": 3}
    options.update(kwargs)
    if clock is not None:
        options["clock"] = clock
    return HttpChatModel(list(hosts), "m", transport=fleet.transport(), **options)


async def test_requests_go_to_the_least_busy_replica_and_ties_take_turns() -> None:
    pool = ReplicaPool([A, B + "/v1", C + "/"])
    assert [r.url for r in pool.replicas] == [A, B, C]
    first = [await pool.acquire() for _ in range(3)]
    assert [r.url for r in first] == [A, B, C]  # one each
    pool.release(first[1])
    assert (await pool.acquire()).url == B  # the only one with nothing in flight
    for replica in pool.replicas:
        while replica.in_flight:
            pool.release(replica)
    turns = []
    for _ in range(6):
        replica = await pool.acquire()
        turns.append(replica.url)
        pool.release(replica)
    assert sorted(turns[:3]) == [A, B, C] and turns[3:] == turns[:3]  # in turn


async def test_a_failing_replica_is_ejected_and_the_retry_goes_to_another_at_once() -> None:
    fleet = ScriptedFleet(A, B)
    fleet.mode[A] = "500"
    model = fleet_client(fleet, A, B)
    with anyio.fail_after(5):  # one backoff sleep would take 15 s or more
        for _ in range(8):
            assert (await model.chat(HI)).text == "hi"
    assert fleet.chats.count(A) == 3  # the threshold, then never again
    assert fleet.chats.count(B) == 8
    assert not model.pool.replica(A).serving and "500 boom" in model.pool.replica(A).reason
    assert model.pool.replica(B).answered == 8


async def test_a_dead_replica_is_not_retried_forever() -> None:
    fleet = ScriptedFleet(A, B)
    fleet.mode[A] = "down"
    model = fleet_client(fleet, A, B)
    with anyio.fail_after(5):
        for _ in range(20):
            await model.chat(HI)
    assert fleet.attempts.count(A) == 3  # connection refused 3 times (the threshold): ejected, left alone
    assert "connection failed" in model.pool.replica(A).reason


async def test_a_refused_request_fails_at_once_and_is_not_sent_to_another_replica() -> None:
    fleet = ScriptedFleet(A, B)
    fleet.mode[A] = fleet.mode[B] = "400"
    model = fleet_client(fleet, A, B)
    with pytest.raises(ModelRequestError, match="400 prompt too long"):
        await model.chat(HI)
    assert len(fleet.chats) == 1
    assert all(r.serving for r in model.pool.replicas)  # the server answered: it is healthy


async def test_every_replica_down_fails_fast_with_model_unavailable_naming_each() -> None:
    fleet = ScriptedFleet(A, B)
    fleet.mode[A] = fleet.mode[B] = "down"
    model = fleet_client(fleet, A, B, breaker_threshold=1, retries=10)
    with anyio.fail_after(5), pytest.raises(ModelUnavailable) as caught:
        await model.chat(HI)
    message = str(caught.value)
    assert "no policy replica is serving" in message
    assert f"{A} (ejected: " in message and f"{B} (ejected: " in message and "next probe in" in message
    with anyio.fail_after(1), pytest.raises(ModelUnavailable, match="no policy replica is serving"):
        await model.chat(HI)  # no attempt at all until a cool-down is over


async def test_an_ejected_replica_is_probed_after_the_cooldown_and_returns_when_it_answers() -> None:
    now = [0.0]
    fleet = ScriptedFleet(A, B)
    fleet.mode[A] = "down"
    model = fleet_client(fleet, A, B, clock=lambda: now[0], breaker_cooldown_s=30, breaker_threshold=1)
    await model.chat(HI)
    assert not model.pool.replica(A).serving
    fleet.mode[A], fleet.models[A] = "ok", 503  # back, not ready yet
    now[0] = 10.0
    await model.chat(HI)
    assert fleet.probes == []  # inside the cool-down: left alone
    now[0] = 31.0
    await model.chat(HI)
    assert fleet.probes == [A] and not model.pool.replica(A).serving  # 503: out for another cool-down
    assert "probe failed: HTTP 503" in model.pool.replica(A).reason
    fleet.models[A] = 200
    now[0] = 45.0
    await model.chat(HI)
    assert fleet.probes == [A]  # the cool-down restarted at the failed probe
    now[0] = 62.0
    for _ in range(4):
        await model.chat(HI)
    assert model.pool.replica(A).serving and fleet.probes == [A, A]
    assert fleet.chats[-4:].count(A) == 2  # back in turn with B


async def test_a_returning_replica_loads_the_live_weights_before_it_serves_and_stays_out_if_it_cannot() -> (
    None
):
    now = [0.0]
    fleet = ScriptedFleet(A, B)
    model = fleet_client(fleet, A, B, clock=lambda: now[0], breaker_cooldown_s=30, breaker_threshold=5)
    restores: list[str] = []
    broken = {"a": True}

    async def restore(root: str) -> None:
        fleet.events.append(f"restore {root}")
        restores.append(root)
        if broken["a"]:
            raise RuntimeError("HTTP 404: no reload endpoint")

    model.pool.set_restore(restore)
    fleet.mode[A] = "down"
    await model.chat(HI)
    # Weights were published: one lost connection is enough (it may come back with its own weights).
    assert not model.pool.replica(A).serving and "connection lost" in model.pool.replica(A).reason
    fleet.mode[A] = "ok"
    now[0] = 31.0
    for _ in range(3):
        await model.chat(HI)
    assert restores == [A] and not model.pool.replica(A).serving  # answered, could not reload: out
    assert "could not load the live weights" in model.pool.replica(A).reason
    broken["a"] = False
    now[0] = 62.0
    for _ in range(3):
        await model.chat(HI)
    assert restores == [A, A] and model.pool.replica(A).serving
    second_restore = [i for i, e in enumerate(fleet.events) if e == f"restore {A}"][1]
    assert "chat a.test" not in fleet.events[:second_restore]  # no request while it was out
    assert "chat a.test" in fleet.events[second_restore:]  # the live weights first, then requests


async def test_one_url_without_published_weights_keeps_the_breakers_trial_request() -> None:
    fleet = ScriptedFleet(A)
    now = [0.0]
    model = fleet_client(fleet, A, clock=lambda: now[0], breaker_threshold=1, retries=0)
    fleet.mode[A] = "500"
    with pytest.raises(ModelUnavailable, match="after 1 attempts"):
        await model.chat(HI)
    with pytest.raises(ModelUnavailable, match="circuit open"):
        await model.chat(HI)
    fleet.mode[A], now[0] = "ok", 31.0
    assert (await model.chat(HI)).text == "hi"  # the trial is the request itself: no probe
    assert fleet.probes == [] and model.breaker.state == "closed"


def test_the_config_takes_several_urls_from_the_file_and_the_environment(tmp_path: Path) -> None:
    file = tmp_path / "arena.toml"
    file.write_text(
        '[models.policy]\nbackend = "http"\nbase_url = "http://vllm-0:8000/v1"\n'
        'replica_urls = ["http://vllm-1:8000/v1"]\nbreaker_cooldown_s = 5\n' + TRAINER
    )
    policy = load_config(file, environ={}).models.policy
    assert policy.urls == ["http://vllm-0:8000/v1", "http://vllm-1:8000/v1"]
    env = {"ARENA_MODELS__POLICY__REPLICA_URLS": "http://vllm-1:8000/v1, http://vllm-2:8000/v1"}
    assert load_config(file, environ=env).models.policy.replica_urls == [
        "http://vllm-1:8000/v1",
        "http://vllm-2:8000/v1",
    ]
    env = {"ARENA_MODELS__POLICY__REPLICA_URLS": '["http://vllm-3:8000/v1"]'}
    spec = load_config(file, environ=env).models.policy
    assert spec.urls == ["http://vllm-0:8000/v1", "http://vllm-3:8000/v1"] and spec.breaker_cooldown_s == 5
    model = build_chat_model(spec)
    assert model.pool is shared_pool(spec.urls)  # type: ignore[attr-defined]  (what the publisher joins)
    assert [r.url for r in model.pool.replicas] == ["http://vllm-0:8000", "http://vllm-3:8000"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("http://ok:1/v1,vllm-2:8000", "models.policy.replica_urls: 'vllm-2:8000' must start with http://"),
        ("http://vllm-0:8000/", "http://vllm-0:8000/ is listed twice among base_url and replica_urls"),
    ],
)
def test_a_bad_replica_url_is_named(tmp_path: Path, value: str, error: str) -> None:
    file = tmp_path / "arena.toml"
    file.write_text('[models.policy]\nbackend = "http"\nbase_url = "http://vllm-0:8000/v1"\n' + TRAINER)
    with pytest.raises(ConfigError) as caught:
        load_config(file, environ={"ARENA_MODELS__POLICY__REPLICA_URLS": value})
    assert error in str(caught.value) and "(from ARENA_MODELS__POLICY__REPLICA_URLS)" in str(caught.value)


def test_a_helper_on_a_policy_replica_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "arena.toml"
    file.write_text(
        '[models.policy]\nbackend = "http"\nbase_url = "http://p0:8000/v1"\nreplica_urls = ["http://p1:8000/v1"]\n'
        '[models.helper]\nbackend = "http"\nbase_url = "http://h:8000/v1"\nreplica_urls = ["http://P1:8000"]\n'
        + TRAINER
    )
    with pytest.raises(ConfigError, match=r"helper.replica_urls is the policy server \(http://P1:8000\)"):
        load_config(file, environ={})


async def test_readiness_is_up_while_one_replica_answers_and_each_has_a_gauge(tmp_path: Path) -> None:
    from ops.metrics import Metrics
    from ops.models import ModelHub
    from simulate.serve import create_app, serving

    from ..scripted_chat import ScriptedChat

    dead = free_port()
    async with serving(create_app(ScriptedChat(), name="policy")) as live:
        file = tmp_path / "arena.toml"
        file.write_text(
            f'[models.policy]\nbackend = "http"\nbase_url = "http://127.0.0.1:{dead}/v1"\n'
            f'replica_urls = ["{live}/v1"]\n' + TRAINER
        )
        metrics = Metrics()
        hub = ModelHub(load_config(file, environ={}), metrics)
        assert await hub.probe("policy")
        text = metrics.exposition().decode()
        assert f'arena_model_replica_up{{replica="http://127.0.0.1:{dead}",role="policy"}} 0.0' in text
        assert f'arena_model_replica_up{{replica="{live}",role="policy"}} 1.0' in text
        assert 'arena_model_backend_up{backend="http",role="policy"} 1.0' in text
    assert not await hub.probe("policy")  # both down now
    assert f'arena_model_replica_up{{replica="{live}",role="policy"}} 0.0' in metrics.exposition().decode()


# --- real `arena serve-model` processes ------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServedReplica:
    """One `arena serve-model` process of the embedded model on a fixed port (restartable there)."""

    def __init__(self, model: Path, logs: Path, *, allow_reload: bool = True) -> None:
        self.model, self.logs, self.allow_reload = model, logs, allow_reload
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, allow_reload: bool | None = None) -> None:
        command = [
            str(Path(sys.executable).parent / "arena"),
            "serve-model",
            "--model",
            str(self.model),
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--name",
            "policy",
            "--port",
            str(self.port),
        ]
        if self.allow_reload if allow_reload is None else allow_reload:
            command.append("--allow-reload")
        self.starts += 1
        log = (self.logs / f"replica-{self.port}-{self.starts}.log").open("wb")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)

    async def ready(self) -> None:
        with anyio.fail_after(180):
            async with httpx.AsyncClient(timeout=2) as client:
                while True:
                    assert self.proc is not None and self.proc.poll() is None, f"replica {self.url} exited"
                    try:
                        if (await client.get(self.url + "/v1/models")).status_code == 200:
                            return
                    except httpx.HTTPError:
                        pass
                    await anyio.sleep(0.2)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    async def greedy(self, prompt: str = "Name a colour.") -> str:
        """A greedy answer straight from this process (no pool): which weights it serves."""
        body = {
            "model": "policy",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 12,
            "temperature": 0,
        }
        async with httpx.AsyncClient(timeout=120) as client:
            response = await client.post(self.url + "/v1/chat/completions", json=body)
        response.raise_for_status()
        return str(response.json()["choices"][0]["message"]["content"])


@pytest.fixture
def replicas(embedded_model_path: Path, tmp_path: Path) -> Iterator[list[ServedReplica]]:
    """Two replicas (not started); every process is killed at the end."""
    started = [ServedReplica(embedded_model_path, tmp_path) for _ in range(2)]
    yield started
    for replica in started:
        replica.kill()


def library_items() -> Any:
    """The library environment's hand-written tasks, prepared as a phase prepares them."""
    from arena.env.loader import BUNDLED_ROOT, load_environment
    from arena.tasks.toml_io import load_tasks
    from work.tasks import prepare_tasks

    env = load_environment(Path(BUNDLED_ROOT) / "library")
    assert env.tasks_path is not None
    tasks = load_tasks(env.tasks_path, env=env.name)

    async def prepare() -> Any:
        prepared, skipped = await prepare_tasks(
            tasks, {env.name: env}, system_prompt="compact", tool_subset=0
        )
        autonomous = [item for item in prepared if item.task.mode == "autonomous"]  # no user to simulate
        assert autonomous, skipped
        return autonomous

    return prepare


@pytest.mark.model
@pytest.mark.slow
async def test_a_replica_stopped_mid_phase_leaves_the_phase_to_the_other_and_rejoins(
    replicas: list[ServedReplica], tmp_path: Path
) -> None:
    from arena.episode.runner import EpisodeConfig
    from arena.tasks.reward import RewardConfig
    from work.episode import EpisodeView, run_and_verify

    first, second = replicas
    for replica in replicas:
        replica.start()
    for replica in replicas:
        await replica.ready()
    file = tmp_path / "arena.toml"
    file.write_text(
        f'[models.policy]\nbackend = "http"\nmodel = "policy"\nbase_url = "{first.url}/v1"\n'
        f'replica_urls = ["{second.url}/v1"]\nbreaker_cooldown_s = 1\nconcurrency = 3\n'
        '[trainer]\nbase_model = "/srv/models/policy"\n'
    )
    policy = build_chat_model(load_config(file, environ={}).models.policy)
    pool = policy.pool  # type: ignore[attr-defined]
    items = await library_items()()
    config = EpisodeView(
        system_prompt="compact",
        tool_subset=0,
        reward=RewardConfig(),
        episode=EpisodeConfig(
            max_turns=2, max_tokens_per_turn=12, max_total_tokens=2048, params=SamplingParams(temperature=0)
        ),
    )
    episodes = [items[i % len(items)] for i in range(12)]
    finishes: list[str] = []
    killed_after: list[int] = []

    async def one(item: Any) -> None:
        transcript, _ = await run_and_verify(policy, item, config)
        finishes.append(transcript.finish)
        if len(finishes) == 3:  # mid-phase: three done, the others running or queued
            second.kill()
            killed_after.append(pool.replica(second.url).answered)

    limiter = anyio.CapacityLimiter(3)

    async def limited(item: Any) -> None:
        async with limiter:
            await one(item)

    async with anyio.create_task_group() as tg:
        for item in episodes:
            tg.start_soon(limited, item)
    assert len(finishes) == 12 and "model_error" not in finishes, finishes
    assert killed_after and killed_after[0] > 0  # it served part of the phase before it was stopped
    assert pool.replica(second.url).answered == killed_after[0]  # and nothing after
    assert not pool.replica(second.url).serving  # ejected after its failed attempts
    # Every policy turn of the phase was answered by one of them: the first took over the rest.
    assert pool.replica(first.url).answered + killed_after[0] >= len(episodes)

    second.start()  # back on the same port
    await second.ready()
    await anyio.sleep(1.2)  # the cool-down
    before = pool.replica(second.url).answered
    for _ in range(4):
        await policy.chat(HI, params=SamplingParams(max_tokens=4, temperature=0))
    assert pool.replica(second.url).serving
    assert pool.replica(second.url).answered >= before + 2  # requests reach it again, in turn

    # GRPO's token-id rollouts share the same pool and spread over both replicas as well.
    from transformers import AutoTokenizer

    from simulate.token_chat import TokenChatModel

    tokenizer = AutoTokenizer.from_pretrained(str(first.model))
    rollouts = TokenChatModel(pool.urls, "policy", tokenizer, pool=shared_pool(pool.urls))
    assert rollouts.pool is pool
    answered = {r.url: r.answered for r in pool.replicas}
    for _ in range(4):
        completion = await rollouts.chat(HI, params=SamplingParams(max_tokens=4, temperature=0))
        assert completion.completion_token_ids
    assert all(r.answered >= answered[r.url] + 2 for r in pool.replicas)


def other_weights(model: Path, folder: Path) -> Path:
    """A checkpoint of the same model with other weights (every MLP's output negated): its greedy
    answers differ, so which weights a replica serves can be read from its answer."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(model / "model.safetensors"))
    changed = {k: -v if k.endswith("mlp.down_proj.weight") else v for k, v in state.items()}
    folder.mkdir()
    save_file(changed, str(folder / "model.safetensors"))
    return folder


@pytest.mark.model
@pytest.mark.slow
async def test_a_publish_drops_a_replica_that_cannot_load_it_and_one_that_returns_serves_the_published_weights(
    replicas: list[ServedReplica], tmp_path: Path, phase_context: Any
) -> None:
    from ops.phases.runtime import http_publisher

    first, second = replicas
    first.start()
    second.start(allow_reload=False)  # no reload endpoints: it cannot take new weights
    await first.ready()
    await second.ready()
    base = await first.greedy()
    file = tmp_path / "arena.toml"
    file.write_text(
        f'[models.policy]\nbackend = "http"\nmodel = "policy"\nbase_url = "{first.url}/v1"\n'
        f'replica_urls = ["{second.url}/v1"]\nbreaker_cooldown_s = 1\n'
        f'[trainer]\nbase_model = "{first.model}"\npublish_dir = "{tmp_path / "shared"}"\n'
    )
    config = load_config(file, environ={})
    policy = build_chat_model(config.models.policy)
    pool = policy.pool  # type: ignore[attr-defined]
    publisher = http_publisher(phase_context(config))
    assert publisher.pool is pool  # the publisher and the policy clients share the replicas' state

    sync = await publisher.publish(other_weights(first.model, tmp_path / "v2"), round_id=1, step=1)
    published = await first.greedy()
    assert sync.kind == "full" and published != base
    dropped = pool.replica(second.url)
    assert not dropped.serving and "HTTP 404" in dropped.reason  # it still serves the old weights: out
    for _ in range(4):
        await policy.chat(HI, params=SamplingParams(max_tokens=4, temperature=0))
    assert dropped.answered == 0  # no request reached the stale replica

    second.kill()
    second.start(allow_reload=True)  # back, able to reload, on its starting weights
    await second.ready()
    assert await second.greedy() == base  # what rollouts must not sample
    await anyio.sleep(1.2)  # the cool-down
    for _ in range(4):
        await policy.chat(HI, params=SamplingParams(max_tokens=4, temperature=0))
    assert dropped.serving and dropped.answered >= 1  # it rejoined...
    assert await second.greedy() == published  # ...with the published weights


async def test_published_weights_outlive_the_clients_of_the_moment() -> None:
    import gc

    async def restore(root: str) -> None:
        return None

    urls = ["http://pinned-a.test/v1", "http://pinned-b.test/v1"]
    shared_pool(urls).set_restore(restore)  # a publisher, gone right after (each phase makes its own)
    gc.collect()
    assert shared_pool(list(reversed(urls))).restore is restore  # a client built later still restores
    unpublished = ["http://loose-a.test/v1", "http://loose-b.test/v1"]
    first = id(shared_pool(unpublished))
    gc.collect()
    assert find_shared_pool(unpublished) is None or id(find_shared_pool(unpublished)) == first
