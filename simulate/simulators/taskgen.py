"""The task generator: difficulty knobs → a tool subset → a task written by the helper model.

How `arena.difficulty.Difficulty` maps onto a simulated task (TRUSTEE-style explicit knobs):

- `walk_length` → the number of expected tool calls, and the tool subset size
  (`walk_length + 1`, plus `distractors` extra tools, capped by the environment's tool count);
- `ambiguity` → how explicit the first message is (0 explicit, 1 implicit references, 2 goal
  only), also the simulated user's vagueness (`UserContext.ambiguity = level / 2`);
- `conversational` → the task's mode;
- persona expertise (novice / intermediate / expert) is drawn from the seed, independently of
  the ambiguity so that vague queries do not always come from novices.

The model writes the user intent, persona, first user message, expected tools (constrained to the
subset) and up to three rubric criteria; the result is an `arena.tasks.model.Task` with origin
`simulated`, a rubric check, and every knob recorded in `Task.difficulty` (including the subset,
which the simulated environment shows to the agent).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from arena.difficulty import Difficulty
from arena.protocols import ChatModel, UserContext
from arena.tasks.model import RubricCheck, Task
from arena.types import Message, ToolSpec
from simulate.simulators.common import SimulatorSettings, structured_call

EXPERTISE = ("novice", "intermediate", "expert")
AMBIGUITY_WORDS = (
    "explicit: name every detail needed (which item, dates, quantities)",
    "implicit: refer to things indirectly (e.g. 'my usual', 'the one from last week')",
    "goal only: say what you want to achieve, not how or with which details",
)

TASKGEN_SYSTEM = (
    "You write realistic test tasks for an AI assistant that uses tools. Given a service, its "
    "tools and the requested difficulty, invent one user with a concrete goal that needs the "
    "listed number of tool calls. Write the user's hidden intent (complete, specific), the user's "
    "persona (expertise only), the first message the user would type (natural, never naming "
    "tools, as explicit as the ambiguity level says), the tools the assistant should use in "
    "order, and short criteria a judge can check in the transcript. Reply with JSON only."
)


class EnvLike(Protocol):
    """What the generator needs from an environment (`arena.env.runtime.Environment` has it)."""

    name: str
    title: str
    description: str
    tool_specs: list[ToolSpec]


class GeneratedTask(BaseModel):
    """The model's answer."""

    intent: str
    expected_tools: list[str] = Field(min_length=1)
    first_message: str
    persona: str
    criteria: list[str] = Field(min_length=1)


class TaskPlan(BaseModel):
    """The knobs of one task before the model writes it."""

    tools: list[str]
    expected_calls: int
    mode: Literal["autonomous", "conversational"]
    ambiguity: int
    expertise: str
    seed: int


def plan_task(tool_names: Sequence[str], difficulty: Difficulty, seed: int) -> TaskPlan:
    """Sample the tool subset and persona for `difficulty` (deterministic per seed)."""
    if not tool_names:
        raise ValueError("the environment has no tools to build a task from")
    rng = random.Random(seed)
    size = min(len(tool_names), difficulty.walk_length + 1 + difficulty.distractors)
    picked = set(rng.sample(list(tool_names), size))
    return TaskPlan(
        tools=[n for n in tool_names if n in picked],  # catalogue order reads more naturally
        expected_calls=difficulty.walk_length,
        mode="conversational" if difficulty.conversational else "autonomous",
        ambiguity=difficulty.ambiguity,
        expertise=rng.choice(EXPERTISE),
        seed=seed,
    )


def taskgen_schema(
    tools: list[str], expected_calls: int, *, short: int = 140, max_criteria: int = 3
) -> dict[str, Any]:
    """The answer schema: expected tools constrained to the subset, texts bounded."""
    return {
        "type": "object",
        "properties": {
            "intent": {"type": "string", "minLength": 10, "maxLength": short + 40},
            "expected_tools": {
                "type": "array",
                "items": {"type": "string", "enum": tools},
                "minItems": 1,
                "maxItems": expected_calls + 1,
            },
            "first_message": {"type": "string", "minLength": 5, "maxLength": short},
            "persona": {"type": "string", "minLength": 3, "maxLength": min(80, short)},
            "criteria": {
                "type": "array",
                "items": {"type": "string", "minLength": 5, "maxLength": min(90, short + 20)},
                "minItems": 1,
                "maxItems": max_criteria,
            },
        },
        "required": ["intent", "expected_tools", "first_message", "persona", "criteria"],
        "additionalProperties": False,
    }


def taskgen_messages(env: EnvLike, plan: TaskPlan) -> list[Message]:
    """The generator's prompt."""
    specs = {s.name: s for s in env.tool_specs}
    tool_lines = "\n".join(f"- {n}: {specs[n].description[:160]}" for n in plan.tools)
    text = (
        f"Service: {env.title}. {env.description.strip()[:300]}\n"
        f"Tools:\n{tool_lines}\n\n"
        f"Expected tool calls: about {plan.expected_calls}\n"
        f"Conversation: {'several messages with the assistant' if plan.mode == 'conversational' else 'one request'}\n"
        f"Query ambiguity: {AMBIGUITY_WORDS[plan.ambiguity]}\n"
        f"User expertise: {plan.expertise}\n\n"
        'Answer as JSON like {"intent":"...","expected_tools":["..."],"first_message":"...",'
        '"persona":"...","criteria":["..."]}'
    )
    return [Message(role="system", content=TASKGEN_SYSTEM), Message(role="user", content=text)]


class TaskGenerator:
    """Writes simulated tasks for an environment at a given difficulty."""

    name = "taskgen"

    def __init__(
        self,
        model: ChatModel,
        settings: SimulatorSettings | None = None,
        *,
        short: int = 140,
        max_criteria: int = 3,
    ) -> None:
        self.model = model
        self.settings = settings or SimulatorSettings(max_tokens=320, temperature=0.7)
        self.short = short
        self.max_criteria = max_criteria

    async def generate(
        self, env: EnvLike, difficulty: Difficulty, *, seed: int = 0, round_id: int | None = None
    ) -> Task:
        """One task. Raises `SimulatorError` when the model gives no valid task, ValueError without tools."""
        plan = plan_task([s.name for s in env.tool_specs], difficulty, seed)

        def check(out: GeneratedTask) -> None:
            lowered = out.first_message.lower()
            named = [t for t in plan.tools if ("_" in t or len(t) > 12) and t.lower() in lowered]
            if named:
                raise ValueError(f"the first message names tools: {named}")
            if any(not c.strip() for c in out.criteria):
                raise ValueError("blank criterion")

        settings = self.settings.model_copy(update={"seed": self.settings.seed + seed})
        out, _ = await structured_call(
            self.model,
            taskgen_messages(env, plan),
            GeneratedTask,
            taskgen_schema(plan.tools, plan.expected_calls, short=self.short, max_criteria=self.max_criteria),
            simulator=self.name,
            settings=settings,
            check=check,
        )
        digest = hashlib.sha1(f"{env.name}|{seed}|{out.intent}|{out.first_message}".encode()).hexdigest()[:8]
        difficulty_record: dict[str, float | int | str] = {
            **difficulty.as_dict(),
            "expected_tool_calls": plan.expected_calls,
            "tool_subset": ",".join(plan.tools),
            "expected_tools": ",".join(out.expected_tools),
            "persona_expertise": plan.expertise,
            "query_ambiguity": AMBIGUITY_WORDS[plan.ambiguity].split(":")[0],
            "seed": seed,
        }
        return Task(
            id=f"sim-{seed}-{digest}",
            env=env.name,
            instruction=out.first_message.strip(),
            mode=plan.mode,
            user=UserContext(
                intent=out.intent.strip(),
                persona=f"{plan.expertise} user; {out.persona.strip()}",
                ambiguity=plan.ambiguity / 2,
            ),
            checks=[RubricCheck(name="intent", criteria=[c.strip() for c in out.criteria])],
            difficulty=difficulty_record,
            origin="simulated",
            round=round_id,
        )


def task_tool_subset(task: Task) -> list[str] | None:
    """The tool subset a generated task was written for (None for tasks without one)."""
    raw = task.difficulty.get("tool_subset")
    if not isinstance(raw, str) or not raw:
        return None
    return [n for n in raw.split(",") if n]
