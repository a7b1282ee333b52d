"""Tasks: the model, `tasks.toml` loading, verification, reward and the gold/empty gates.

`verify` is imported from `arena.tasks.verify` (re-exporting it here would shadow the module).
"""

from arena.tasks.gates import GateReport, GateResult, adversary_gate, gold_gate, run_gates
from arena.tasks.model import (
    AnswerCheck,
    Check,
    PythonCheck,
    RubricCheck,
    SqlCheck,
    StateMatchCheck,
    Task,
    split_task_id,
)
from arena.tasks.replay import ReferenceReplayError, reference_state, replay_reference
from arena.tasks.reward import CheckResult, RewardConfig, Verdict
from arena.tasks.toml_io import load_tasks, parse_tasks
from arena.tasks.transcript import ReplayTranscript, TranscriptLike

__all__ = [
    "AnswerCheck",
    "Check",
    "CheckResult",
    "GateReport",
    "GateResult",
    "PythonCheck",
    "ReferenceReplayError",
    "ReplayTranscript",
    "RewardConfig",
    "RubricCheck",
    "SqlCheck",
    "StateMatchCheck",
    "Task",
    "TranscriptLike",
    "Verdict",
    "adversary_gate",
    "gold_gate",
    "load_tasks",
    "parse_tasks",
    "reference_state",
    "replay_reference",
    "run_gates",
    "split_task_id",
]
