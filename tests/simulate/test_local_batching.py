"""Control flow of the dynamic batcher, with a scripted fake batch function (no model)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio
import pytest

from simulate.batching import DynamicBatcher, Job

pytestmark = pytest.mark.anyio


class ScriptedFakeRunner:
    """Records every batch and answers each request with `request * 10` after a short delay."""

    def __init__(self, delay_s: float = 0.05, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.delay_s = delay_s
        self.fail_on = fail_on
        self.saw_cancelled: list[int] = []

    def __call__(self, jobs: Sequence[Job[int, int]]) -> None:
        self.batches.append([j.request for j in jobs])
        if self.fail_on is not None and self.fail_on in self.batches[-1]:
            raise RuntimeError("scripted failure")
        # Finish the rows one by one, like a decode loop whose rows end at different steps.
        for job in sorted(jobs, key=lambda j: j.request):
            time.sleep(self.delay_s)
            if job.cancelled:
                self.saw_cancelled.append(job.request)
                continue
            job.finish(job.request * 10)


async def test_concurrent_requests_share_batches_up_to_max_batch() -> None:
    runner = ScriptedFakeRunner(delay_s=0.01)
    batcher: DynamicBatcher[int, int] = DynamicBatcher(runner, max_batch=4, collect_s=0.02)
    results: dict[int, int] = {}

    async def one(i: int) -> None:
        results[i] = await batcher.submit(i)

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(one, i)
    assert results == {i: i * 10 for i in range(10)}
    assert all(len(b) <= 4 for b in runner.batches)
    assert sorted(r for b in runner.batches for r in b) == list(range(10))
    # 10 simultaneous requests with max_batch 4 need exactly three batches.
    assert len(runner.batches) == 3
    assert batcher.largest_batch == 4


async def test_early_rows_are_delivered_before_the_batch_ends() -> None:
    runner = ScriptedFakeRunner(delay_s=0.2)
    batcher: DynamicBatcher[int, int] = DynamicBatcher(runner, max_batch=8, collect_s=0.02)
    finished_at: dict[int, float] = {}
    start = time.perf_counter()

    async def one(i: int) -> None:
        await batcher.submit(i)
        finished_at[i] = time.perf_counter() - start

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, 9)  # arrives first: it leads the batch (and so waits for its end)
        await anyio.sleep(0.005)
        for i in (0, 1):
            tg.start_soon(one, i)
    assert runner.batches == [[9, 0, 1]]
    # Row 0 is finished first (0.2 s into the batch) and must not wait for row 9 (0.6 s).
    assert finished_at[0] < finished_at[9] - 0.25


async def test_a_failing_batch_fails_each_of_its_requests_and_the_batcher_recovers() -> None:
    runner = ScriptedFakeRunner(delay_s=0.0, fail_on=1)
    batcher: DynamicBatcher[int, int] = DynamicBatcher(runner, max_batch=8, collect_s=0.02)
    errors: list[str] = []

    async def one(i: int) -> None:
        try:
            await batcher.submit(i)
        except RuntimeError as exc:
            errors.append(str(exc))

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(one, i)
    assert errors == ["scripted failure"] * 3
    assert await batcher.submit(5) == 50


async def test_a_cancelled_caller_is_dropped_and_others_still_get_results() -> None:
    runner = ScriptedFakeRunner(delay_s=0.1)
    batcher: DynamicBatcher[int, int] = DynamicBatcher(runner, max_batch=8, collect_s=0.02)
    results: dict[int, int] = {}

    async def one(i: int) -> None:
        results[i] = await batcher.submit(i)

    async with anyio.create_task_group() as tg:
        for i in (1, 2):
            tg.start_soon(one, i)
        await anyio.sleep(0.005)  # request 1 leads; request 3 joins its batch, then gives up
        with anyio.move_on_after(0.05):
            await batcher.submit(3)
    assert results == {1: 10, 2: 20}
    assert runner.saw_cancelled == [3]
    assert batcher.queued == 0


async def test_a_caller_cancelled_while_queued_leaves_the_queue() -> None:
    runner = ScriptedFakeRunner(delay_s=0.2)
    batcher: DynamicBatcher[int, int] = DynamicBatcher(runner, max_batch=1, collect_s=0.0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(batcher.submit, 1)
        await anyio.sleep(0.05)  # request 1 is now being decoded alone
        with anyio.move_on_after(0.05):
            await batcher.submit(2)  # queued behind it, then abandoned
    assert runner.batches == [[1]]
    assert batcher.queued == 0


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        DynamicBatcher(ScriptedFakeRunner(), max_batch=0)
