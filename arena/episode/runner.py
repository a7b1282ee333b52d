"""The episode runner: policy ↔ tools ↔ (simulated) user, recorded as a `Transcript`.

Autonomous mode: the task instruction is the whole request; the episode ends when the agent
answers without calling a tool. Conversational mode: a `UserSimulator` answers each plain-text
reply of the agent and ends the conversation with a stop.

Nothing the policy emits can make the runner raise: malformed tool calls become error
observations (and count as malformed), tool faults come back as `ok=False` results, a failing
backend ends the episode as `model_error`, a failing environment or user simulator as `env_error`.
Cancellation is not caught: a cancelled episode simply stops.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from typing import Literal, Protocol

import anyio
import structlog
from pydantic import BaseModel, Field

from arena.env.instance import EnvInstance, ToolResult
from arena.episode.history import is_truncated, policy_view
from arena.episode.parser import MalformedCall, ParsedTurn, clean_text, native_tool_calls, parse_tool_calls
from arena.episode.prompts import (
    USER_STOP_TOKEN,
    build_system_prompt,
    malformed_observation,
    tool_observation,
)
from arena.episode.transcript import (
    CallRecord,
    FinishKind,
    MalformedRecord,
    TokenRecorder,
    ToolStat,
    Transcript,
    TurnRecord,
)
from arena.protocols import ChatModel, ModelError, UserContext, UserSimulator
from arena.types import Completion, Message, SamplingParams, ToolCall, Usage

log = structlog.get_logger(__name__)


class EpisodeTask(Protocol):
    """The fields of `arena.tasks.model.Task` an episode needs."""

    id: str
    env: str
    instruction: str
    mode: Literal["autonomous", "conversational"]
    user: UserContext | None


class EpisodeConfig(BaseModel):
    """Caps and sampling of one episode. Use the same config for training and evaluation."""

    max_turns: int = Field(default=10, ge=1, le=1000)  # policy calls
    max_tokens_per_turn: int = Field(default=256, ge=1)
    max_total_tokens: int = Field(default=4096, ge=1)  # generated tokens, and the episode's sequence
    params: SamplingParams = Field(default_factory=SamplingParams)
    history_turns: int | None = Field(default=None, ge=0)  # keep only the last N turns (AWM: 3)
    max_consecutive_malformed: int = Field(default=3, ge=1)  # then finish as format_error
    # Finish as "stuck" once one call (same tool, same arguments) has failed this many times: a
    # policy that resends a refused call unchanged learns nothing from the rest of its turns.
    max_repeated_failures: int | None = Field(default=None, ge=1)
    turn_timeout_s: float | None = Field(default=None, gt=0)  # per policy call / user reply


class EpisodeSetupError(ValueError):
    """The episode cannot start (e.g. a conversational task without a user simulator)."""


class _Stop(Exception):
    """Internal: ends the loop with a finish kind."""

    def __init__(self, finish: FinishKind, detail: str = "") -> None:
        super().__init__(finish)
        self.finish: FinishKind = finish
        self.detail = detail


def _completion_tokens(completion: Completion) -> int:
    """Tokens the policy generated this turn (backends without counts: about 4 characters each)."""
    if completion.usage.completion_tokens:
        return completion.usage.completion_tokens
    if completion.completion_token_ids is not None:
        return len(completion.completion_token_ids)
    return math.ceil(len(completion.text) / 4)


class _Episode:
    """The mutable state of one running episode."""

    def __init__(
        self,
        policy: ChatModel,
        instance: EnvInstance,
        task: EpisodeTask,
        user: UserSimulator | None,
        config: EpisodeConfig,
        system_prompt: str,
    ) -> None:
        self.policy = policy
        self.instance = instance
        self.task = task
        self.user = user
        self.config = config
        self.tools = list(instance.tool_specs)
        self.tool_names = {t.name for t in self.tools}
        self.user_context = task.user or UserContext(intent=task.instruction)
        self.tokens = TokenRecorder()
        self.consecutive_malformed = 0
        self.failures: Counter[str] = Counter()  # call key -> times it failed
        self.generated = 0
        self.t = Transcript(
            task_id=task.id,
            env=task.env,
            mode=task.mode,
            policy_model=getattr(policy, "name", ""),
            history_turns=config.history_turns,
            messages=[
                Message(role="system", content=system_prompt),
                Message(role="user", content=task.instruction),
            ],
        )
        # What the user simulator sees: the plain conversation, never tool calls or results.
        self.user_view: list[Message] = [Message(role="user", content=task.instruction)]

    async def run(self) -> Transcript:
        start = time.perf_counter()
        try:
            while True:
                await self.turn()
        except _Stop as stop:
            self.t.finish = stop.finish
            self.t.finish_detail = stop.detail
        t = self.t
        t.timings.total_s = time.perf_counter() - start
        t.chains = self.tokens.chains
        t.chain_breaks = self.tokens.breaks
        t.tokens_complete = self.tokens.complete and bool(t.turns)
        t.malformed_calls = len(t.malformed_errors)
        log.info(
            "episode.finished",
            task=t.task_id,
            env=t.env,
            mode=t.mode,
            finish=t.finish,
            turns=len(t.turns),
            calls=len(t.calls),
            malformed=t.malformed_calls,
            seconds=round(t.timings.total_s, 3),
        )
        return t

    async def turn(self) -> None:
        t, cfg = self.t, self.config
        if len(t.turns) >= cfg.max_turns:
            raise _Stop("max_turns", f"{cfg.max_turns} policy turns")
        budget = cfg.max_total_tokens - self.generated
        if budget <= 0:
            raise _Stop("max_tokens", f"{self.generated} tokens generated")
        params = cfg.params.model_copy(update={"max_tokens": min(cfg.max_tokens_per_turn, budget)})
        view = policy_view(t.messages, cfg.history_turns)
        index = len(t.turns)
        started = time.perf_counter()
        try:
            with anyio.fail_after(cfg.turn_timeout_s):
                completion = await self.policy.chat(view, tools=self.tools or None, params=params)
        except ModelError as exc:
            raise _Stop("model_error", str(exc) or type(exc).__name__) from None
        except TimeoutError:
            raise _Stop("model_error", f"the policy did not answer within {cfg.turn_timeout_s} s") from None
        model_s = time.perf_counter() - started
        t.timings.model_s += model_s
        self.generated += _completion_tokens(completion)
        self._account(completion)
        self.tokens.add_turn(
            index,
            completion.prompt_token_ids,
            completion.completion_token_ids,
            completion.completion_logprobs,
            truncated_history=is_truncated(t.messages, view),
            forced=completion.completion_forced,
        )

        native = bool(completion.tool_calls)
        if native:
            parsed = native_tool_calls(
                completion.tool_calls, content=completion.text, known_tools=self.tool_names
            )
        else:
            parsed = parse_tool_calls(completion.text, known_tools=self.tool_names)
        record = TurnRecord(
            index=index,
            text=clean_text(completion.text),
            content=parsed.content,
            native_tool_calls=native,
            n_calls=len(parsed.calls),
            n_malformed=len(parsed.errors),
            finish_reason=completion.finish_reason,
            usage=completion.usage,
            model_s=model_s,
        )
        t.turns.append(record)
        # Raw text for Hermes turns (the policy gets back exactly what it wrote, see history.py),
        # plus the parsed calls for verifiers; native turns keep the backend's content and calls.
        if native:
            # Every native call stays on the message (malformed ones too) so each tool message
            # answers a call id the backend knows.
            calls = [
                c if isinstance(c, ToolCall) else ToolCall(id=c.id, name=c.name or "", arguments={})
                for c in parsed.in_order()
            ]
            t.messages.append(Message(role="assistant", content=parsed.content, tool_calls=calls))
        else:
            t.messages.append(Message(role="assistant", content=record.text, tool_calls=parsed.calls))
        if parsed.content:
            self.user_view.append(Message(role="assistant", content=parsed.content))

        if parsed.has_tool_activity:
            await self._act(parsed, record)
            self._check_context(completion)
            return
        self.consecutive_malformed = 0
        t.final_answer = parsed.content
        if t.mode == "autonomous":
            raise _Stop("answered")
        self._check_context(completion)
        await self._ask_user(record)

    def _account(self, completion: Completion) -> None:
        u = self.t.usage
        self.t.usage = Usage(
            prompt_tokens=u.prompt_tokens + completion.usage.prompt_tokens,
            completion_tokens=u.completion_tokens + completion.usage.completion_tokens,
        )

    def _check_context(self, completion: Completion) -> None:
        """The episode's sequence (last prompt + completion) must stay within the total budget."""
        used = completion.usage.prompt_tokens + completion.usage.completion_tokens
        if completion.prompt_token_ids is not None and completion.completion_token_ids is not None:
            used = len(completion.prompt_token_ids) + len(completion.completion_token_ids)
        if used >= self.config.max_total_tokens:
            raise _Stop("max_tokens", f"sequence of {used} tokens reached the budget")

    async def _act(self, parsed: ParsedTurn, record: TurnRecord) -> None:
        """Run the turn's calls in order; malformed ones become error observations."""
        t = self.t
        started = time.perf_counter()
        try:
            for item in parsed.in_order():
                if isinstance(item, MalformedCall):
                    t.malformed_errors.append(MalformedRecord(turn=record.index, error=item))
                    t.messages.append(
                        Message(
                            role="tool",
                            content=malformed_observation(item),
                            tool_call_id=item.id,
                            name=item.name,
                        )
                    )
                    continue
                result = await self._call(item)
                t.calls.append(CallRecord(turn=record.index, call=item, result=result))
                stat = t.tool_stats.setdefault(item.name, ToolStat())
                if result.ok:
                    stat.ok += 1
                else:
                    stat.failed += 1
                t.messages.append(
                    Message(
                        role="tool",
                        content=clean_text(tool_observation(result.ok, result.output, result.error)),
                        tool_call_id=item.id,
                        name=item.name,
                    )
                )
                if not result.ok:
                    self._count_failure(item)
        finally:
            record.tools_s = time.perf_counter() - started
            t.timings.tools_s += record.tools_s
        if parsed.errors:
            self.consecutive_malformed += 1
            if self.consecutive_malformed >= self.config.max_consecutive_malformed:
                raise _Stop(
                    "format_error", f"{self.consecutive_malformed} consecutive turns with malformed calls"
                )
        else:
            self.consecutive_malformed = 0

    def _count_failure(self, call: ToolCall) -> None:
        cap = self.config.max_repeated_failures
        key = call.name + json.dumps(call.arguments, sort_keys=True, default=str)
        self.failures[key] += 1
        if cap is not None and self.failures[key] >= cap:
            raise _Stop("stuck", f"{call.name} failed {self.failures[key]} times with the same arguments")

    async def _call(self, call: ToolCall) -> ToolResult:
        try:
            return await self.instance.call(call.name, call.arguments)
        except Exception as exc:  # the instance promises not to raise: this is an infrastructure fault
            log.warning("episode.env_error", task=self.t.task_id, tool=call.name, error=repr(exc))
            raise _Stop("env_error", f"{call.name}: {type(exc).__name__}: {exc}") from None

    async def _ask_user(self, record: TurnRecord) -> None:
        assert self.user is not None
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.config.turn_timeout_s):
                reply = await self.user.reply(self.user_context, list(self.user_view))
        except TimeoutError:
            raise _Stop("env_error", "the user simulator did not answer in time") from None
        except Exception as exc:  # ModelError of the helper model, or a simulator defect
            log.warning("episode.user_error", task=self.t.task_id, error=repr(exc))
            raise _Stop("env_error", f"user simulator: {type(exc).__name__}: {exc}") from None
        finally:
            record.user_s = time.perf_counter() - started
            self.t.timings.user_s += record.user_s
        content = clean_text(reply.content)
        if reply.stop or USER_STOP_TOKEN in content:
            raise _Stop("user_stop", content.replace(USER_STOP_TOKEN, "").strip())
        message = Message(role="user", content=content)
        self.t.messages.append(message)
        self.user_view.append(message)


async def run_episode(
    policy: ChatModel,
    instance: EnvInstance,
    task: EpisodeTask,
    *,
    user: UserSimulator | None = None,
    config: EpisodeConfig | None = None,
    system_prompt: str | None = None,
) -> Transcript:
    """Run one episode of `task` on `instance` with `policy` and return its transcript.

    `system_prompt` should come from `prompts.system_prompt_for(env)` (the environment's rules);
    without it a generic one is used. Conversational tasks need `user`. The instance is not
    closed here: the caller owns it (verification reads its final state).
    """
    config = config or EpisodeConfig()
    if task.mode == "conversational" and user is None:
        raise EpisodeSetupError(f"task {task.id!r} is conversational: run_episode needs a user simulator")
    prompt = system_prompt if system_prompt is not None else build_system_prompt(mode=task.mode)
    return await _Episode(policy, instance, task, user, config, prompt).run()
