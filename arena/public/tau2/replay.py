"""A task's starting state, and its reference solution replayed on it (the DB check's target).

τ² sets an episode's environment up in three steps: the task's `initialization_data` merged into the
database, its `initialization_actions` run, and the write calls of its `message_history` (the
conversation the episode resumes) replayed. The gold end state is that state with the task's gold
actions run in order; a gold action that fails is recorded and skipped, as τ² logs and skips it.

Arena's ports have no user-side tools (τ²'s retail and airline have none): a user-requestor call in
the history is skipped, one in the initialization or the gold actions is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from arena.public.tau2.docstore import DocStore, PortedTool, call_tool
from arena.public.tau2.domains import domain_port, domain_tools
from arena.public.tau2.model import Tau2Domain, Tau2Task

NO_USER_TOOLS = "Error: Arena's port of this domain has no user tools"


class Tau2ReplayError(ValueError):
    """A task's initial state cannot be set up (τ² fails the task's set-up then too)."""


class CallRecord(BaseModel):
    """One tool call and what it answered (the agent's, the user's or a gold action's)."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    requestor: Literal["assistant", "user"] = "assistant"
    content: str = ""
    error: bool = False


@dataclass
class GoldReplay:
    """The gold end state and what each gold action answered."""

    store: DocStore
    results: list[CallRecord]


def _merge(base: Any, update: Any) -> Any:
    """`update` merged into `base`: objects key by key, anything else replaced (as τ²'s update)."""
    if isinstance(base, dict) and isinstance(update, dict):
        out = dict(base)
        for key, value in update.items():
            out[key] = _merge(base.get(key), value)
        return out
    return update


def _initialization_data(store: DocStore, data: dict[str, Any], domain: str) -> None:
    if data.get("user_data"):
        raise Tau2ReplayError("initialization_data.user_data: the port has no user database")
    normalize = domain_port(domain).normalize
    for collection, records in (data.get("agent_data") or {}).items():
        if collection not in store.collections or not isinstance(records, dict):
            raise Tau2ReplayError(f"initialization_data: no collection {collection!r} to update")
        for key, update in records.items():
            merged = _merge(store.get(collection, key) or {}, update)
            store.put(collection, str(key), normalize(collection, str(key), merged))


def _history_tool_calls(task: Tau2Task) -> list[tuple[dict[str, Any], dict[str, Any] | None, str]]:
    """`(tool call, its tool message or None, requestor)` for each call in the message history."""
    history = (task.initial_state.message_history if task.initial_state else None) or []
    answers = {m.get("id"): m for m in history if m.get("role") == "tool"}
    out = []
    for message in history:
        if message.get("role") not in ("assistant", "user"):
            continue
        for call in message.get("tool_calls") or []:
            requestor = call.get("requestor") or message["role"]
            out.append((call, answers.get(call.get("id")), requestor))
    return out


def history_calls(task: Tau2Task) -> list[CallRecord]:
    """The tool calls of the task's message history (τ²'s trajectory, which it scores, holds them)."""
    return [
        CallRecord(
            name=call.get("name", ""),
            arguments=call.get("arguments") or {},
            requestor="user" if requestor == "user" else "assistant",
            content=str((answer or {}).get("content") or ""),
            error=bool((answer or {}).get("error", False)),
        )
        for call, answer, requestor in _history_tool_calls(task)
    ]


def history_texts(task: Tau2Task) -> list[str]:
    """The agent's messages in the task's message history (they count for COMMUNICATE in τ²)."""
    history = (task.initial_state.message_history if task.initial_state else None) or []
    return [m["content"] for m in history if m.get("role") == "assistant" and m.get("content")]


def apply_initial_state(
    store: DocStore,
    task: Tau2Task,
    domain: str,
    tools: dict[str, PortedTool],
    *,
    with_history: bool = True,
) -> None:
    """Set a fresh copy of the template up as the task starts (in place).

    `with_history=False` leaves the message history's calls out, for a player that replays the
    history itself (running them twice would apply their writes twice).
    """
    state = task.initial_state
    if state is None:
        return
    if state.initialization_data:
        _initialization_data(store, state.initialization_data, domain)
    for number, action in enumerate(state.initialization_actions or []):
        name, env = action.get("func_name", ""), action.get("env_type", "assistant")
        if env != "assistant":
            raise Tau2ReplayError(f"initialization action {number} ({name}): {NO_USER_TOOLS[7:]}")
        outcome = call_tool(tools, store, name, action.get("arguments") or {})
        if outcome.error:
            raise Tau2ReplayError(f"initialization action {number} ({name}) failed: {outcome.content}")
    for call, _answer, requestor in _history_tool_calls(task) if with_history else []:
        tool = tools.get(call.get("name", ""))
        # As τ²: only the calls that change the state are run again; unknown tools changed nothing.
        if requestor != "assistant" or tool is None or not tool.writes:
            continue
        call_tool(tools, store, tool.name, call.get("arguments") or {})


def initial_state(domain: Tau2Domain, task: Tau2Task, *, with_history: bool = True) -> DocStore:
    """A new store in the state the task's episode starts from (see `apply_initial_state`)."""
    store = domain.template().copy()
    apply_initial_state(store, task, domain.name, domain_tools(domain.name), with_history=with_history)
    return store


def replay_gold(domain: Tau2Domain, task: Tau2Task) -> GoldReplay:
    """The task's gold actions run on its initial state: the DB check's target."""
    tools = domain_tools(domain.name)
    store = initial_state(domain, task)
    results = []
    for action in task.evaluation_criteria.actions:
        if action.requestor == "user":
            outcome_content, outcome_error = NO_USER_TOOLS, True
        else:
            outcome = call_tool(tools, store, action.name, action.arguments)
            outcome_content, outcome_error = outcome.content, outcome.error
        results.append(
            CallRecord(
                name=action.name,
                arguments=action.arguments,
                requestor=action.requestor,
                content=outcome_content,
                error=outcome_error,
            )
        )
    return GoldReplay(store=store, results=results)
