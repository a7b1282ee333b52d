"""One τ² task played by a policy and a simulated user, the way τ²'s half-duplex orchestrator plays it.

- The agent's system prompt is the domain's policy, with Arena's conversational tool-use
  instructions (`build_system_prompt`); the tools are the domain's (`Tau2Domain.tool_specs`).
- The run opens with the agent's greeting, or the task's message history (`start`).
- The user (a `UserSimulator`, given the task's scenario as its intent) sees only the spoken
  conversation. It ends the run with `UserTurn.stop` or a stop marker in its text (`user_stop`).
- An agent message with tool calls (Hermes `<tool_call>` blocks or native calls) goes to the
  environment: every call runs through `call_tool` on the episode's copy of the database and comes
  back as a tool message; any text beside the calls is kept but the user does not hear it. A
  message without calls is said to the user. The transfer tool is an ordinary call.
- Steps are counted as τ² counts them: a user message, an agent message, and one batch of tool
  results are one step each. After a step that does not leave calls waiting, `max_steps` steps end
  the run (`max_steps`) and so do `max_errors` failed calls (`too_many_errors`).
- A call that cannot be decoded (a `<tool_call>` block that is not a call object, a native call
  without a name) runs nothing and comes back as an error tool message; it counts as a failed call, as a refused
  call does in τ², and is not a call of the trajectory.
- A policy failure ends the run as `model_error`, a user simulator failure as `user_error`, an
  agent message with neither text nor calls as `agent_error`. Only `user_stop`/`agent_stop` runs
  can earn a reward.

`run_task` plays the task, then scores the run (`reward.score_task`) against the gold replay's
end state, asking the judge about NL assertions only when the task's reward basis has them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from arena.episode.history import policy_view
from arena.episode.parser import MalformedCall, ParsedTurn, clean_text, native_tool_calls, parse_tool_calls
from arena.episode.prompts import USER_STOP_TOKEN, build_system_prompt
from arena.protocols import ChatModel, ModelError, UserContext, UserSimulator
from arena.public.tau2.docstore import CallOutcome, DocStore, PortedTool, call_tool
from arena.public.tau2.nl_judge import judge_assertions
from arena.public.tau2.replay import CallRecord, replay_gold
from arena.public.tau2.reward import Tau2Score, score_task
from arena.public.tau2.start import opening, start_store
from arena.types import Message, SamplingParams, ToolCall

if TYPE_CHECKING:
    from arena.public.tau2.model import Tau2Domain, Tau2Task

Termination = Literal[
    "user_stop", "agent_stop", "max_steps", "too_many_errors", "agent_error", "user_error", "model_error"
]
Side = Literal["agent", "user", "env"]

# What a τ²-style user writes to end the conversation (Arena's simulators use `UserTurn.stop`).
STOP_MARKERS = (USER_STOP_TOKEN, "###TRANSFER###", "###OUT-OF-SCOPE###")
ROLE_OF_AGENT = (
    "You are a customer service agent. Each message you write is either a reply to the customer or "
    "tool calls, not both; follow the policy below in everything you do."
)


class Tau2Limits(BaseModel):
    """Caps of one run (τ²'s `tau2 run` defaults) and the policy's sampling."""

    max_steps: int = Field(default=200, ge=1)  # τ² `tau2 run --max-steps` default (the class default is 100)
    max_errors: int = Field(default=10, ge=1)  # failed tool calls before `too_many_errors`
    max_tokens_per_step: int = Field(default=1024, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int | None = None
    turn_timeout_s: float | None = Field(default=None, gt=0)  # per policy call and per user reply


class Tau2Run(BaseModel):
    """A played task: the conversation, the calls, how it ended and, once scored, its score."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task_id: str
    trial: int = 0
    messages: list[Message] = Field(default_factory=list)  # greeting/history on; no system prompt
    calls: list[CallRecord] = Field(default_factory=list)
    agent_texts: list[str] = Field(default_factory=list)
    termination: Termination = "max_steps"
    detail: str = ""
    steps: int = 0
    errors: int = 0  # failed calls, malformed ones included
    malformed: int = 0
    seconds: float = 0.0
    score: Tau2Score | None = None
    nl_detail: str = ""


class _End(Exception):
    """Internal: a failure that ends the run at once."""

    def __init__(self, termination: Termination, detail: str) -> None:
        super().__init__(detail)
        self.termination: Termination = termination
        self.detail = detail


def system_prompt(domain: Tau2Domain) -> str:
    """The agent's system prompt: the domain's policy under Arena's conversational instructions."""
    return build_system_prompt(description=ROLE_OF_AGENT, rules=domain.policy, mode="conversational")


class _Play:
    """The mutable state of one run."""

    def __init__(
        self,
        task: Tau2Task,
        policy: ChatModel,
        user: UserSimulator,
        limits: Tau2Limits,
        tools: dict[str, PortedTool],
        tool_specs: list[Any],
        store: DocStore,
        prompt: str,
        trial: int,
    ) -> None:
        self.policy, self.user, self.limits = policy, user, limits
        self.tools, self.tool_specs, self.store = tools, tool_specs, store
        self.run = Tau2Run(task_id=task.id, trial=trial)
        self.task = task
        self.history: list[Message] = [Message(role="system", content=prompt)]  # what the policy reads
        self.user_view: list[Message] = []  # what the user reads: spoken messages only
        self.context = UserContext(intent=task.user_instructions(), persona=task.user_scenario.persona or "")
        self.params = SamplingParams(
            temperature=limits.temperature, max_tokens=limits.max_tokens_per_step, seed=limits.seed
        )
        self.pending: ParsedTurn | None = None
        self.stopped: Termination | None = None

    def _say(self, message: Message, *, history: Message | None = None, spoken: bool = False) -> None:
        self.run.messages.append(message)
        self.history.append(history or message)
        if spoken:
            self.user_view.append(message)

    async def play(self) -> Tau2Run:
        started = time.perf_counter()
        side = self._start()
        try:
            while self.stopped is None:
                if side == "user":
                    side = await self._user()
                elif side == "agent":
                    side = await self._agent()
                else:
                    side = self._env()
                self.run.steps += 1
                if side == "env":  # τ² checks its caps only once no call waits for its result
                    continue
                if self.run.steps >= self.limits.max_steps:
                    self.stopped, self.run.detail = "max_steps", f"{self.run.steps} steps"
                if self.run.errors >= self.limits.max_errors:
                    self.stopped, self.run.detail = "too_many_errors", f"{self.run.errors} failed calls"
            self.run.termination = self.stopped
        except _End as end:
            self.run.termination, self.run.detail = end.termination, end.detail
        self.run.seconds = time.perf_counter() - started
        return self.run

    def _start(self) -> Side:
        """The greeting or the task's message history; the side that speaks next."""
        start = opening(self.task)
        for message, spoken in zip(start.messages, start.spoken, strict=True):
            self._say(message, spoken=spoken)
        self.run.calls += start.calls
        self.run.agent_texts += start.agent_texts
        return start.next

    async def _agent(self) -> Side:
        try:
            with anyio.fail_after(self.limits.turn_timeout_s):
                completion = await self.policy.chat(
                    policy_view(self.history), tools=self.tool_specs or None, params=self.params
                )
        except ModelError as exc:
            raise _End("model_error", str(exc) or type(exc).__name__) from None
        except TimeoutError:
            raise _End("model_error", f"no answer within {self.limits.turn_timeout_s} s") from None
        native = bool(completion.tool_calls)
        # Names are not checked here: a call to an unknown tool is τ²'s error result, not a parse error.
        parsed = (
            native_tool_calls(completion.tool_calls, content=completion.text)
            if native
            else parse_tool_calls(completion.text)
        )
        text = parsed.content.strip()
        if text:
            self.run.agent_texts.append(text)
        if native:
            # Every native call stays on the message, so each tool message answers an id it made.
            said = [
                c if isinstance(c, ToolCall) else ToolCall(id=c.id, name=c.name or "", arguments={})
                for c in parsed.in_order()
            ]
            seen = Message(role="assistant", content=parsed.content, tool_calls=said)
        else:  # the policy reads back exactly what it wrote (see arena.episode.history)
            seen = Message(role="assistant", content=clean_text(completion.text), tool_calls=parsed.calls)
        message = Message(role="assistant", content=text, tool_calls=parsed.calls)
        if parsed.has_tool_activity:
            self._say(message, history=seen)
            self.pending = parsed
            return "env"
        if not text:
            self._say(message, history=seen)
            raise _End("agent_error", "the agent's message has neither text nor a tool call")
        self._say(message, history=seen, spoken=True)
        return "user"

    def _env(self) -> Side:
        assert self.pending is not None
        for item in self.pending.in_order():
            if isinstance(item, MalformedCall):
                self.run.malformed += 1
                self.run.errors += 1
                content = f"Error: malformed tool call: {item.message}"
                self._say(Message(role="tool", content=content, tool_call_id=item.id, name=item.name))
            else:
                self._run_call(item)
        self.pending = None
        return "agent"

    def _run_call(self, call: ToolCall) -> None:
        try:
            outcome = call_tool(self.tools, self.store, call.name, call.arguments)
        except Exception as exc:  # a port's defect: an error result, as τ²'s environment makes one
            outcome = CallOutcome(content=f"Error: {exc}", error=True)
        self.run.calls.append(
            CallRecord(
                name=call.name,
                arguments=call.arguments,
                requestor="assistant",
                content=outcome.content,
                error=outcome.error,
            )
        )
        if outcome.error:
            self.run.errors += 1
        self._say(
            Message(role="tool", content=clean_text(outcome.content), tool_call_id=call.id, name=call.name)
        )

    async def _user(self) -> Side:
        try:
            with anyio.fail_after(self.limits.turn_timeout_s):
                turn = await self.user.reply(self.context, list(self.user_view))
        except TimeoutError:
            raise _End(
                "user_error", f"the user did not answer within {self.limits.turn_timeout_s} s"
            ) from None
        except Exception as exc:  # the helper model's ModelError, or a simulator defect
            raise _End("user_error", f"{type(exc).__name__}: {exc}") from None
        content = clean_text(turn.content)
        self._say(Message(role="user", content=content), spoken=True)
        if turn.stop or any(marker in content for marker in STOP_MARKERS):
            self.stopped = "user_stop"
        return "agent"


async def play_task(
    domain: Tau2Domain,
    task: Tau2Task,
    policy: ChatModel,
    user: UserSimulator,
    limits: Tau2Limits | None = None,
    *,
    store: DocStore,
    tools: dict[str, PortedTool],
    trial: int = 0,
) -> Tau2Run:
    """Play `task` on `store` (changed in place) without scoring it; never raises for the models' faults."""
    play = _Play(
        task,
        policy,
        user,
        limits or Tau2Limits(),
        tools,
        list(domain.tool_specs),
        store,
        system_prompt(domain),
        trial,
    )
    return await play.play()


async def score_run(
    task: Tau2Task,
    run: Tau2Run,
    *,
    end_state: DocStore,
    gold: DocStore,
    judge: ChatModel | None = None,
) -> Tau2Score:
    """τ²'s reward of a played run; the judge is asked only when the basis needs NL assertions."""
    criteria = task.evaluation_criteria
    verdicts: list[bool] | None = None
    finished = run.termination in ("user_stop", "agent_stop")
    if finished and "NL_ASSERTION" in criteria.reward_basis and criteria.nl_assertions:
        verdicts, run.nl_detail = await judge_assertions(judge, run.messages, list(criteria.nl_assertions))
    return score_task(
        task,
        end_state=end_state,
        gold=gold,
        calls=run.calls,
        agent_texts=run.agent_texts,
        termination=run.termination,
        nl_verdicts=verdicts,
    )


async def run_task(
    domain: Tau2Domain,
    task: Tau2Task,
    policy: ChatModel,
    user: UserSimulator,
    limits: Tau2Limits | None = None,
    judge: ChatModel | None = None,
    *,
    tools: dict[str, PortedTool] | None = None,
    gold: DocStore | None = None,
    trial: int = 0,
) -> Tau2Run:
    """Play `task` and score it (`Tau2Run.score`).

    `tools` defaults to the domain's ported tools and `gold` to the gold replay's end state
    (`replay_gold`); tests pass their own.
    """
    if tools is None:
        from arena.public.tau2.domains import domain_tools

        tools = domain_tools(domain.manifest.domain)
    store = start_store(domain, task, tools)
    replay = None
    try:
        run = await play_task(domain, task, policy, user, limits, store=store, tools=tools, trial=trial)
        if gold is None:
            replay = replay_gold(domain, task)
            gold = replay.store
        run.score = await score_run(task, run, end_state=store, gold=gold, judge=judge)
        return run
    finally:
        store.close()
        if replay is not None:
            replay.store.close()
