"""`run_items` with a batch runner: chunks of its size, the concurrency counted in items, and every
result committed once; a stop lets the chunks under way finish and commits what they ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.store import Store, repo
from ops.phases.base import StopRequested
from ops.phases.episodes import run_items, run_work_items
from work.jobs import BatchRunner, EpisodeResult, WorkItem

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ScriptedBatchFake:
    """A scripted fake cluster: answers each chunk after a short wait, recording what it got."""

    def __init__(self) -> None:
        self.chunks: list[list[str]] = []
        self.in_flight = self.most_in_flight = 0

    async def run(self, items: list[WorkItem]) -> list[EpisodeResult]:
        self.chunks.append([f"{i.task_id}#{i.sample_idx}" for i in items])
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await anyio.sleep(0.02)
        self.in_flight -= 1
        return [EpisodeResult(reward=float(i.sample_idx), passed=True, worker="w1") for i in items]


def items(n: int) -> list[WorkItem]:
    return [WorkItem(task_id=f"t{i // 2}", env="banking", sample_idx=i % 2) for i in range(n)]


async def test_a_batch_runner_gets_chunks_and_every_result_is_stored_once(
    make_config, phase_context, tmp_path: Path
) -> None:
    config = make_config()
    fake = ScriptedBatchFake()
    async with Store(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") as store:
        await store.migrate()
        ctx = phase_context(config, store, phase="evaluate")
        batched = BatchRunner(run=fake.run, size=4)
        stats = await run_work_items(ctx, items(10), batched, purpose="eval", concurrency=8)
        async with store.transaction() as s:
            stored = await repo.episodes_for_round(s, ctx.round, purpose="eval")
    assert sorted(len(c) for c in fake.chunks) == [2, 4, 4]
    assert fake.most_in_flight == 2  # 8 items in flight = two chunks of 4
    assert stats["ran"] == 10 and len(stored) == 10
    assert {(e.task_id, e.sample_idx) for e in stored} == {(i.task_id, i.sample_idx) for i in items(10)}
    assert all(e.worker == "w1" and e.reward == e.sample_idx for e in stored)


async def test_a_stop_commits_the_chunks_under_way_and_none_after(
    make_config, phase_context, tmp_path
) -> None:
    config = make_config()
    fake = ScriptedBatchFake()
    passes = 0

    async def stop_after_two_chunks() -> None:
        nonlocal passes
        passes += 1
        if passes > 2:
            raise StopRequested

    saved: list[tuple[WorkItem, EpisodeResult]] = []

    async def save(_s: Any, batch: list[tuple[WorkItem, EpisodeResult]]) -> None:
        saved.extend(batch)

    async with Store(f"sqlite+aiosqlite:///{tmp_path / 'b.db'}") as store:
        await store.migrate()
        ctx = phase_context(config, store, phase="evaluate")
        ctx._safe_point = stop_after_two_chunks
        with pytest.raises(StopRequested):
            await run_items(
                ctx, items(12), BatchRunner(run=fake.run, size=3), done=set(), save=save, concurrency=6
            )
    assert len(fake.chunks) == 2 and len(saved) == 6
    assert sorted(f"{i.task_id}#{i.sample_idx}" for i, _ in saved) == sorted(
        x for chunk in fake.chunks for x in chunk
    )
