"""The model server fault of `arena bench soak`: a stand-in model behind the real OpenAI-compatible
server (`simulate.serve`) in a process of its own, called by every stand-in episode through the
real HTTP client (`simulate.http.HttpChatModel`, its retries and circuit breaker), SIGKILLed in the
middle of EVALUATE on a schedule and started again on the same port, as systemd's `Restart=` or a
Kubernetes restart would.

The server is `ops.soak_model_server` (`StandInChatModel`, a scripted fake: no model), which
answers after a short pause so that a kill finds calls in flight.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import structlog
from anyio.abc import Process
from pydantic import BaseModel, Field

from ops.soak_faults import due_evaluate
from simulate.http import HttpChatModel

log = structlog.get_logger(__name__)
MODEL_NAME = "standin-model"
READY_TIMEOUT_S = 60.0


class ModelServerFaults(BaseModel):
    """The model server killed mid-EVALUATE on a schedule, and what the episodes saw."""

    every: int = 0
    down_s: float = 0.0
    killed: list[int] = Field(default_factory=list, description="Rounds the server was killed in.")
    kills: dict[int, float] = Field(
        default_factory=dict, description="Round -> seconds from the kill until the server answered again."
    )
    calls: int = Field(0, description="Model calls the stand-in episodes started.")
    failed_calls: int = Field(0, description="Episodes whose model call failed after the client's retries.")


class ModelServer:
    """The stand-in model server process on a fixed port: start, kill, start again."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: Process | None = None

    @property
    def pid(self) -> int:
        """The running server's process id."""
        assert self.process is not None, "start() first"
        return self.process.pid

    async def start(self) -> None:
        """Start the process and return once it answers `/v1/models`."""
        command = [
            sys.executable,
            "-m",
            "ops.soak_model_server",
            "--port",
            str(self.port),
            "--parent",
            str(os.getpid()),
        ]
        # A session of its own, as every process the soak starts: the orphan count tells those apart.
        self.process = await anyio.open_process(command, start_new_session=True, stdout=None, stderr=None)
        with anyio.fail_after(READY_TIMEOUT_S):
            async with httpx.AsyncClient(base_url=self.url, timeout=2) as client:
                while True:
                    if self.process.returncode is not None:
                        raise RuntimeError(f"the stand-in model server exited ({self.process.returncode})")
                    try:
                        if (await client.get("/v1/models")).status_code == 200:
                            return
                    except httpx.HTTPError:
                        pass
                    await anyio.sleep(0.05)

    async def kill(self) -> None:
        """SIGKILL the process and reap it."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()

    async def stop(self) -> None:
        """Stop it (a stand-in holds nothing to save: SIGKILL) and reap it."""
        await self.kill()


class ModelServerKiller:
    """SIGKILL the model server in EVALUATE of every `every`-th round, once episodes are calling it,
    and start it again after `down_s` seconds."""

    def __init__(self, server: ModelServer, every: int, down_s: float = 0.5) -> None:
        if every < 1:
            raise ValueError("a model server kill needs a schedule (every N >= 1 rounds)")
        self.server = server
        self.report = ModelServerFaults(every=every, down_s=down_s)

    async def run(self, daemon: Any) -> None:
        """Watch the daemon's rounds until cancelled."""
        while True:
            rnd = await due_evaluate(daemon, self.report.every, self.report.killed)
            seen = self.report.calls  # counted by the stand-in EVALUATE: kill with a call in flight
            while self.report.calls == seen and daemon.phase == "evaluate":  # noqa: ASYNC110
                await anyio.sleep(0.005)
            killed = time.monotonic()
            await self.server.kill()
            self.report.killed.append(rnd)  # now: the round may end before the server is back
            log.info("soak.model_server_killed", round=rnd)
            await anyio.sleep(self.report.down_s)
            await self.server.start()
            daemon.foreign_processes.add(self.server.pid)
            self.report.kills[rnd] = round(time.monotonic() - killed, 3)


@asynccontextmanager
async def stand_in_model_server(
    kill_every: int,
) -> AsyncIterator[tuple[HttpChatModel | None, ModelServerKiller | None]]:
    """The stand-in model server and its killer when `kill_every` asks for them."""
    if not kill_every:
        yield None, None
        return
    server = ModelServer()
    await server.start()
    # Retries and a short breaker cooldown: a restart takes about a second, and the daemon's
    # episodes should ride it out as the policy's would ride out a model server restarted by systemd.
    model = HttpChatModel(
        server.url, MODEL_NAME, retries=6, backoff_s=0.25, backoff_max_s=2, breaker_cooldown_s=1
    )
    try:
        yield model, ModelServerKiller(server, kill_every)
    finally:
        await model.aclose()
        await server.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
