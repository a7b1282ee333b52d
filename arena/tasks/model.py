"""The task model: what the agent is asked to do, the reference solution, and how it is checked.

A task belongs to one environment; its id is unique inside that environment and `full_id`
(`ENV/ID`) is unique across Arena. Checks are a discriminated union on `kind`:

- `state_match`: the final database equals the state reached by replaying the reference calls on a
  fresh instance (every table, unless some are ignored);
- `sql`: one named boolean query over the final state, with the initial state attached as schema
  `initial` (`SELECT count(*) > (SELECT count(*) FROM initial.orders) FROM orders`);
- `answer`: expected (and forbidden) values in the final answer, compared after normalization;
- `python`: `check(initial, final, answer) -> bool` source, run in the sandbox for synthesized tasks;
- `rubric`: criteria judged by a `ChatModel`; the check passes only when every criterion does;
- `action`: write calls the episode must have made (in order, when `ordered`), read from the
  instance's write log: for effects that cancel out (freeze then unfreeze), which no state shows.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena.protocols import UserContext
from arena.types import ToolCall

TaskMode = Literal["autonomous", "conversational"]
TaskOrigin = Literal["manual", "graph", "program", "simulated", "targeted"]
CheckKind = Literal["state_match", "sql", "answer", "python", "rubric", "action"]

# Task ids appear in `ENV/ID` strings, file names and CLI arguments: keep them plain.
_DEFAULT_NAMES = {
    "state_match": "final state matches the reference",
    "sql": "sql",
    "answer": "final answer",
    "python": "python check",
    "rubric": "rubric",
    "action": "required writes were made",
}
# The name of the `state_match` check a write task gets when it has none (`Task.with_state_guard`).
NOTHING_ELSE_CHANGED = "nothing else changed"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class _CheckBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""

    @property
    def label(self) -> str:
        """The name shown in verdicts: the check's own name, or a default for its kind."""
        return self.name or _DEFAULT_NAMES[self.kind]  # type: ignore[attr-defined]


class StateMatchCheck(_CheckBase):
    """The final state equals the reference replay's final state (tau2-style).

    `ignore` lists tables (`"audit_log"`) or columns (`"orders.updated_at"`) left out of the
    comparison, for state the task does not care about.
    """

    kind: Literal["state_match"] = "state_match"
    ignore: list[str] = Field(default_factory=list)


class SqlCheck(_CheckBase):
    """A named boolean query: passes when its first row's first column is true (non-zero, non-NULL)."""

    kind: Literal["sql"] = "sql"
    name: str = Field(min_length=1)
    sql: str = Field(min_length=1)


# Caps that tell a report from a dump of values (AnswerCheck's docstring says why).
ANSWER_MAX_CHARS = 1200
ANSWER_MAX_NUMBERS = 40


class AnswerCheck(_CheckBase):
    """Every `contains` value appears in the final answer and no `not_contains` value does.

    A `contains` item may be a list of alternatives, one of which must appear (`["3", "third"]`):
    a correct answer worded another way still passes. Both sides are normalized first (case,
    whitespace, currency symbols, number formats); a value that starts or ends with a digit only
    matches whole numbers (`"12"` does not match `"120"`).

    Substring checks reward an answer that lists every value it has seen, and a policy trained on
    them learns to: paste whole tool results, or enumerate guesses ("149, 150, 151, ..."). So an
    answer longer than `max_chars` characters, or mentioning more than `max_numbers` distinct
    numbers, fails however many expected values it holds. The defaults sit far above any honest
    report (the bundled reference answers use at most 230 characters and 9 numbers).
    """

    kind: Literal["answer"] = "answer"
    contains: list[str | list[str]] = Field(default_factory=list)
    not_contains: list[str] = Field(default_factory=list)
    max_chars: int = Field(default=ANSWER_MAX_CHARS, ge=1)
    max_numbers: int = Field(default=ANSWER_MAX_NUMBERS, ge=1)
    # Expected values the answer works out from what it read (a sum, a status inferred from a
    # date) rather than copies from a tool result or the user's words (see `arena.tasks.provenance`).
    derived: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> AnswerCheck:
        if not self.contains and not self.not_contains:
            raise ValueError("an answer check needs `contains` or `not_contains` values")
        if any(isinstance(item, list) and not item for item in self.contains):
            raise ValueError("an answer check's list of alternatives must not be empty")
        expected = [v for group in self.expected_groups() for v in group]
        if any(not v.strip() for v in [*expected, *self.not_contains]):
            raise ValueError("answer check values must not be blank")
        unknown = [v for v in self.derived if v not in expected]
        if unknown:
            raise ValueError(
                f"`derived` names values that are not in `contains`: {', '.join(map(repr, unknown))}"
            )
        return self

    def expected_groups(self) -> list[list[str]]:
        """Each `contains` item as its alternatives (a plain value is a group of one)."""
        return [[item] if isinstance(item, str) else list(item) for item in self.contains]


class PythonCheck(_CheckBase):
    """`code` defines `check(initial, final, answer) -> bool` over two sqlite3 connections.

    Checks of synthesized tasks always run in the sandbox; `sandbox = true` asks for it on a
    hand-written task too (`ARENA_SANDBOX=all` does it for every task).
    """

    kind: Literal["python"] = "python"
    code: str = Field(min_length=1)
    sandbox: bool = False

    @field_validator("code")
    @classmethod
    def _defines_check(cls, code: str) -> str:
        try:
            compile(code, "<python check>", "exec")
        except SyntaxError as exc:
            raise ValueError(f"python check does not compile: {exc.msg} (line {exc.lineno})") from None
        if not re.search(r"^def\s+check\s*\(", code, re.MULTILINE):
            raise ValueError("python check must define `def check(initial, final, answer)`")
        return code


class RubricCheck(_CheckBase):
    """Criteria an LLM judge assesses from the transcript; passes when all of them pass."""

    kind: Literal["rubric"] = "rubric"
    criteria: list[str] = Field(min_length=1)

    @field_validator("criteria")
    @classmethod
    def _non_blank(cls, criteria: list[str]) -> list[str]:
        if any(not c.strip() for c in criteria):
            raise ValueError("rubric criteria must not be blank")
        return criteria


class ExpectedCall(BaseModel):
    """One write call an action check requires: the tool, and arguments it must have had (a subset)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class ActionCheck(_CheckBase):
    """The episode made these write calls successfully (each with at least `args`), in order if `ordered`.

    State checks cannot see work whose effects cancel out (freeze a card, then unfreeze it): the
    final state equals the initial one, so an agent that does nothing matches it. The instance's
    write log (every successful write call, with its arguments) can, and this check reads it.
    Calls between the required ones, or after them, do not matter here; the state checks judge
    what they did.
    """

    kind: Literal["action"] = "action"
    calls: list[ExpectedCall] = Field(min_length=1)
    ordered: bool = True


Check = Annotated[
    StateMatchCheck | SqlCheck | AnswerCheck | PythonCheck | RubricCheck | ActionCheck,
    Field(discriminator="kind"),
]


class Task(BaseModel):
    """One task of one environment, with its reference solution and checks."""

    model_config = ConfigDict(extra="forbid")

    id: str
    env: str = Field(min_length=1)
    env_version: str | None = None
    instruction: str = Field(min_length=1)
    mode: TaskMode = "autonomous"
    user: UserContext | None = None
    answer: str | None = None
    reference: list[ToolCall] = Field(default_factory=list)
    checks: list[Check] = Field(min_length=1)
    difficulty: dict[str, float | int | str] = Field(default_factory=dict)
    origin: TaskOrigin = "manual"
    round: int | None = None
    # Tools from other environments shown to the agent as noise ("ENV/TOOL"), per the `distractors` knob.
    distractor_tools: list[str] = Field(default_factory=list)
    # Row identifiers in the reference's write arguments that the agent works out rather than
    # copies from what it saw (see `arena.tasks.grounding`).
    derived_args: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        if not _ID_RE.match(value):
            raise ValueError(
                f"task id {value!r} must start with a letter or digit and use only letters, digits, '_', '.', '-'"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Task:
        if self.mode == "conversational" and self.user is None:
            raise ValueError("a conversational task needs `user` (intent, persona)")
        written = {str(v) for call in self.reference for v in _scalars(call.arguments)}
        unknown = [v for v in self.derived_args if v not in written]
        if unknown:
            raise ValueError(
                "`derived_args` names values that no reference call passes: " + ", ".join(map(repr, unknown))
            )
        return self

    @property
    def full_id(self) -> str:
        """`ENV/ID`: the id unique across environments (CLI, store keys, logs)."""
        return f"{self.env}/{self.id}"

    @property
    def needs_state(self) -> bool:
        """Whether any check reads the database (so the task needs an executable environment)."""
        return any(c.kind in ("state_match", "sql", "python") for c in self.checks)

    def writes(self, write_tools: Collection[str]) -> bool:
        """Whether the reference makes a write (calls one of the environment's `write_tools`)."""
        return any(call.name in write_tools for call in self.reference)

    def with_state_guard(self, write_tools: Collection[str]) -> Task:
        """This task, with a `state_match` check added when its reference writes and it has none.

        A write task must fail when the episode changed anything beyond what the reference changes
        (another reply sent into another thread); only a `state_match` check sees every table.
        A task that tolerates differences says so with that check's `ignore`.
        """
        if not self.writes(write_tools) or any(isinstance(c, StateMatchCheck) for c in self.checks):
            return self
        guard = StateMatchCheck(name=NOTHING_ELSE_CHANGED)
        return self.model_copy(update={"checks": [*self.checks, guard]})

    @property
    def needs_judge(self) -> bool:
        """Whether any check is a rubric (so verification needs a judge model)."""
        return any(c.kind == "rubric" for c in self.checks)


def _scalars(value: Any) -> list[Any]:
    """Every scalar inside a JSON value (arguments nest lists and objects)."""
    if isinstance(value, dict):
        return [s for item in value.values() for s in _scalars(item)]
    if isinstance(value, list):
        return [s for item in value for s in _scalars(item)]
    return [] if value is None else [value]


def split_task_id(full_id: str) -> tuple[str, str]:
    """`"food_delivery/cancel-order"` -> `("food_delivery", "cancel-order")`; ValueError when malformed."""
    env, sep, task_id = full_id.partition("/")
    if not sep or not env or not task_id or "/" in task_id:
        raise ValueError(
            f"task id {full_id!r} must look like ENV/ID, e.g. food_delivery/cancel-mistaken-order"
        )
    return env, task_id
