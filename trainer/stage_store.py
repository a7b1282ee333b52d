"""The learning benchmark's finished stages, kept on disk so a rerun into the same folder resumes.

A full `arena bench learn` run takes over an hour on CPU. Killed partway (out of memory, a
restart), it keeps its trained checkpoints — SFT and GRPO resume from them — and, through this
store, its finished evaluations and training figures: each stage's record is written as soon as
it exists. A rerun with the same `--out` reuses a record only for the same weights (path, size
and modification time of every weight file) and reuses its evaluation only for the same held-out
tasks and evaluation settings; anything else is trained or evaluated again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import structlog
from pydantic import BaseModel, ValidationError

from trainer.checkpoints import write_json
from trainer.evaluate import EvalReport

log = structlog.get_logger(__name__)


class StageTraining(BaseModel):
    """A stage's policy and what training it took (none for the base model)."""

    stage: str
    policy: str
    train_seconds: float = 0.0
    train_steps: int = 0
    train_peak_rss_mb: int | None = None  # the process's resident peak while training
    groups: int = 0  # GRPO groups trained on
    zero_variance_groups: int = 0  # of those, groups whose rewards were all equal (no gradient)
    resampled_groups: int = 0  # flat groups replaced by dynamic sampling
    # GRPO, over its steps: the mean and largest per-token KL(sampler ‖ trainer) (k3 estimate), the
    # largest per-token importance ratio before truncation, the mean KL to the reference (beta > 0),
    # and the tokens a grammar forced (not trained).
    kl_per_token: float | None = None
    kl_per_token_max: float | None = None
    ratio_peak: float | None = None
    reference_kl: float | None = None
    forced_tokens: int = 0


class StageReport(StageTraining):
    """One evaluated policy."""

    eval: EvalReport


class StageRecord(StageTraining):
    """What a stage left on disk: its policy, training figures and, once done, its evaluation."""

    weights: str  # `weights_signature` of the policy folder
    eval_key: str | None = None  # `evaluation_key` the evaluation was made under
    eval: EvalReport | None = None

    def report(self) -> StageReport:
        """The stage as the benchmark reports it (only once evaluated)."""
        if self.eval is None:
            raise ValueError(f"stage {self.stage!r} has not been evaluated")
        return StageReport(**self.model_dump(include=set(StageTraining.model_fields)), eval=self.eval)


def weights_signature(policy_dir: Path) -> str:
    """Names, sizes and modification times of the weight files: changes whenever the weights do."""
    parts = []
    for path in sorted(Path(policy_dir).glob("*.safetensors")):
        stat = path.stat()
        parts.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}")
    if not parts:
        raise ValueError(f"{policy_dir} holds no .safetensors weights")
    return ";".join(parts)


def evaluation_key(task_keys: list[str], settings: BaseModel | dict) -> str:
    """A digest of the evaluated tasks and the settings they were evaluated under."""
    body = settings.model_dump(mode="json") if isinstance(settings, BaseModel) else settings
    text = json.dumps({"tasks": sorted(task_keys), "settings": body}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class StageStore:
    """One JSON record per stage in `folder`; a record that does not parse counts as absent."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _path(self, stage: str) -> Path:
        return self.folder / f"{stage}.json"

    def load(self, stage: str, policy_dir: Path) -> StageRecord | None:
        """The stage's record if it was made for these very weights, else None."""
        path = self._path(stage)
        if not path.is_file():
            return None
        try:
            record = StageRecord.model_validate_json(path.read_text())
        except (ValidationError, ValueError) as exc:
            log.warning("stage_store.unreadable", path=str(path), error=str(exc).splitlines()[0])
            return None
        if record.policy != str(policy_dir) or record.weights != weights_signature(policy_dir):
            return None
        return record

    def save(self, record: StageRecord) -> None:
        """Write the record atomically (a kill mid-write leaves the previous one)."""
        write_json(self._path(record.stage), record.model_dump(mode="json"))
