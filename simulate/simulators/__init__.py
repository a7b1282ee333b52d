"""TRUSTEE-style simulators played by the helper model: tools, users, the judge, task writing.

Each is a prompt, a pydantic output model and a JSON schema run through
`common.structured_call` (constrained decoding, validation, bounded retries, `SimulatorError`);
the tool quality filter for imported tools is deterministic.
"""

from simulate.simulators.common import (
    SimulatorError,
    SimulatorSettings,
    reset_simulator_counts,
    simulator_counts,
    structured_call,
)
from simulate.simulators.judge import CriterionScore, JudgeScore, TrajectoryJudge, default_criteria
from simulate.simulators.quality import ToolQuality, assess_tool, filter_tools
from simulate.simulators.taskgen import TaskGenerator, plan_task, task_tool_subset
from simulate.simulators.tool import ToolMemory, ToolOutcome, ToolSimulator, argument_errors
from simulate.simulators.user import SimulatedUser

__all__ = [
    "CriterionScore",
    "JudgeScore",
    "SimulatedUser",
    "SimulatorError",
    "SimulatorSettings",
    "TaskGenerator",
    "ToolMemory",
    "ToolOutcome",
    "ToolQuality",
    "ToolSimulator",
    "TrajectoryJudge",
    "argument_errors",
    "assess_tool",
    "default_criteria",
    "filter_tools",
    "plan_task",
    "reset_simulator_counts",
    "simulator_counts",
    "structured_call",
    "task_tool_subset",
]
