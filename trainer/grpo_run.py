"""One GRPO round's run state (`RoundRun`) and the TRL callback between its optimizer steps.

The callback saves checkpoints every `save_every` steps (and at the end), brings an HTTP rollout
server to each update, awaits the daemon's safe point and turns TRL's logs into `StepMetrics`.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import structlog

from trainer.checkpoints import Lineage, is_peft, prune_checkpoints, save_checkpoint
from trainer.config import TrainerConfig
from trainer.grpo_model import savable
from trainer.memory import release_memory
from trainer.metrics import CheckpointInfo, OnStep, RolloutStats, SafePoint, StepMetrics, grpo_step_metrics
from trainer.publish import WeightPublisher
from trainer.rollout import RolloutBridge
from trainer.weight_sync import sync_step

log = structlog.get_logger(__name__)


class RoundRun:
    """The state of one `train_round` call, shared by the step callback and the caller."""

    def __init__(
        self,
        *,
        round_id: int,
        config: TrainerConfig,
        out_dir: Path,
        parent: str,
        offset: int,
        prior_seconds: float,
        bridge: RolloutBridge,
        on_step: OnStep | None,
        safe_point: SafePoint | None,
        publisher: WeightPublisher | None,
    ) -> None:
        self.round_id = round_id
        self.config = config
        self.out_dir = out_dir
        self.parent = parent
        self.offset = offset
        self.prior_seconds = prior_seconds
        self.started = time.perf_counter()
        self.bridge = bridge
        self.on_step = on_step
        self.safe_point = safe_point
        self.publisher = publisher
        self.metrics: list[StepMetrics] = []
        self.checkpoints: list[CheckpointInfo] = []
        self.stop_error: BaseException | None = None
        self.step_started = time.perf_counter()
        self.last_saved_step = offset
        self.saved_batches = 0  # rollout batches before the last checkpoint of this call
        self.tokenizer: Any = None
        self.last_sync: Any = None  # trainer.publish.WeightSync of the step's publication, if any

    def sync(self, model: Any, step: int) -> None:
        """Bring the HTTP rollout server to this step's weights (`last_sync` says how it went)."""
        assert self.publisher is not None

        def checkpoint() -> Path:
            return self.save(model, step) if self.last_saved_step != step else self.checkpoints[-1].path

        self.last_sync = anyio.from_thread.run(
            functools.partial(
                sync_step,
                self.publisher,
                self.config,
                model,
                round_id=self.round_id,
                step=step,
                staging=self.out_dir / "sync" / f"step-{step:06d}",
                checkpoint=checkpoint,
            )
        )

    def save(self, model: Any, step: int) -> Path:
        # The checkpoint is rated on every rollout batch since the previous one, not the last batch
        # alone: one batch is G × tasks_per_step episodes of a few tasks, too noisy to pick the best.
        stats = RolloutStats.pooled(self.bridge.history[self.saved_batches :])
        lineage = Lineage(
            parent=self.parent,
            round_id=self.round_id,
            phase="grpo",
            step=step,
            total_steps=self.config.max_steps,
            reward_mean=stats.reward_mean,
            reward_std=stats.reward_std,
            pass_rate=stats.pass_rate,
            episodes=stats.episodes,
            train_seconds=self.prior_seconds + time.perf_counter() - self.started,
        )
        adapter = model if is_peft(model) else None
        full = savable(model, Path(self.parent))
        path = save_checkpoint(full, self.tokenizer, self.out_dir, lineage, adapter=adapter)
        prune_checkpoints(self.out_dir, keep_last=self.config.keep_last, keep_best=self.config.keep_best)
        self.checkpoints.append(CheckpointInfo(path=path, step=step, reward_mean=stats.reward_mean))
        self.last_saved_step = step
        self.saved_batches = len(self.bridge.history)
        return path


def step_callback(run: RoundRun) -> Any:
    from transformers import TrainerCallback

    class ArenaCallback(TrainerCallback):
        """Checkpoints, weight publishing, safe points and metrics between optimizer steps."""

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            run.step_started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            model = kwargs["model"]
            step = run.offset + state.global_step
            last = state.global_step >= state.max_steps
            if step % run.config.save_every == 0 or last:
                run.save(model, step)
            if run.publisher is not None and run.config.rollout_backend == "http":
                run.sync(model, step)
            # Each step's rollouts and backward pass free gigabytes into glibc's heap, which keeps
            # them: a CPU learn-bench round grew to 20 GB resident by its fourth step, of which a
            # malloc_trim (called from a debugger) gave back 15.6 GB at once.
            release_memory(f"grpo step {step}")
            if run.safe_point is not None and not last:
                try:
                    anyio.from_thread.run(run.safe_point)
                except BaseException as exc:  # the daemon's stop (or a cancellation): checkpoint, then stop
                    run.stop_error = exc
                    if run.last_saved_step != step:
                        run.save(model, step)
                    control.should_training_stop = True

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if not logs or "loss" not in logs:
                return
            stats = run.bridge.history[-1] if run.bridge.history else RolloutStats()
            metrics = grpo_step_metrics(
                round_id=run.round_id,
                step=run.offset + state.global_step,
                logs=logs,
                stats=stats,
                seconds=time.perf_counter() - run.step_started,
            )
            if run.last_sync is not None:
                metrics.sync_kind = run.last_sync.kind
                metrics.sync_bytes = run.last_sync.bytes
                metrics.sync_seconds = run.last_sync.seconds
            run.last_sync = None
            run.metrics.append(metrics)
            log.info("grpo.step", **{k: v for k, v in metrics.model_dump().items() if v is not None})
            if run.on_step is not None:
                run.on_step(metrics)

    return ArenaCallback()
