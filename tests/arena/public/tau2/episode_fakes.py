"""A toy τ² domain and scripted fakes for the episode and bench tests (all invented here).

A "bank" of one collection with two tools and a transfer tool, ported with `ported_tool`; a task in
the importer's model; a scripted fake policy, a scripted fake user and a scripted fake judge.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

from arena.protocols import UserContext, UserTurn
from arena.public.tau2.docstore import DocStore, Record, Tau2ToolError, call_tool, collect_tools, ported_tool
from arena.public.tau2.model import Tau2Task
from arena.types import Completion, Message, ToolCall, ToolSpec

# --- the toy domain: ported tools over a DocStore -------------------------------------------------


@ported_tool()
def get_account(store: DocStore, account_id: str) -> Record:
    doc = store.get("accounts", account_id)
    if doc is None:
        raise Tau2ToolError("Account not found")
    return Record(doc)


@ported_tool(writes=True)
def set_balance(store: DocStore, account_id: str, balance: int) -> Record:
    doc = store.get("accounts", account_id)
    if doc is None:
        raise Tau2ToolError("Account not found")
    doc["balance"] = balance
    store.put("accounts", account_id, doc)
    return Record(doc)


@ported_tool()
def transfer_to_human_agents(store: DocStore, summary: str) -> str:
    return "Transfer successful"


TOOLS = collect_tools(sys.modules[__name__])


class ToyDomain:
    """Stands in for `Tau2Domain`: the attributes an episode reads."""

    name = "toy"
    manifest = SimpleNamespace(domain="toy")
    policy = "Only change a balance the account owner asks for."
    tool_specs = [ToolSpec(name=name) for name in TOOLS]

    def __init__(self) -> None:
        self._template = DocStore.from_data({"accounts": {"a1": {"owner": "Ann", "balance": 10}}})

    def template(self) -> DocStore:
        return self._template


def make_task(basis: list[str] | None = None, **extra: Any) -> Tau2Task:
    data = {
        "id": "t1",
        "description": None,
        "user_scenario": {
            "persona": "brisk",
            "instructions": {
                "domain": "toy",
                "reason_for_call": "You want the balance of account a1 set to 20.",
                "known_info": "You are Ann.",
                "unknown_info": None,
                "task_instructions": "Stop once it is done.",
            },
        },
        "initial_state": None,
        "evaluation_criteria": {
            "actions": [
                {
                    "action_id": "t1_0",
                    "requestor": "assistant",
                    "name": "set_balance",
                    "arguments": {"account_id": "a1", "balance": 20},
                    "info": None,
                    "compare_args": None,
                }
            ],
            "communicate_info": ["20"],
            "nl_assertions": ["The agent confirms the new balance."],
            "env_assertions": [],
            "reward_basis": basis or ["DB", "COMMUNICATE"],
        },
        **extra,
    }
    return Tau2Task.model_validate(data)


def gold_store(domain: ToyDomain, task: Tau2Task) -> DocStore:
    store = domain.template().copy()
    for action in task.evaluation_criteria.actions:
        call_tool(TOOLS, store, action.name, action.arguments)
    return store


# --- scripted fakes -------------------------------------------------------------------------------


class ScriptedFakePolicy:
    """A fake policy: answers from a script (a Completion, or an exception to raise); then repeats the last."""

    name = "scripted-fake-policy"

    def __init__(self, *script: Completion | Exception) -> None:
        self.script = list(script)
        self.seen: list[list[Message]] = []
        self.params: list[Any] = []

    async def chat(self, messages: list[Message], *, tools: Any = None, params: Any = None) -> Completion:
        self.seen.append(list(messages))
        self.params.append(params)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        return item


class ScriptedFakeUser:
    """A fake user: replies from a script; records what it saw."""

    def __init__(self, *turns: UserTurn | Exception) -> None:
        self.turns = list(turns)
        self.seen: list[list[Message]] = []
        self.contexts: list[UserContext] = []

    async def reply(self, context: UserContext, conversation: list[Message]) -> UserTurn:
        self.seen.append(list(conversation))
        self.contexts.append(context)
        item = self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]
        if isinstance(item, Exception):
            raise item
        return item


class ScriptedFakeJudge:
    """A fake judge: answers every rubric with the given verdicts."""

    name = "scripted-fake-judge"

    def __init__(self, *verdicts: bool) -> None:
        self.verdicts = verdicts
        self.prompts: list[list[Message]] = []

    async def chat(self, messages: list[Message], *, tools: Any = None, params: Any = None) -> Completion:
        self.prompts.append(messages)
        out = [{"criterion": i, "reason": "seen", "passed": v} for i, v in enumerate(self.verdicts, start=1)]
        return Completion(text=json.dumps({"verdicts": out}))


def call(name: str, **arguments: Any) -> Completion:
    return Completion(tool_calls=[ToolCall(id=f"c_{name}", name=name, arguments=arguments)])


def hermes(name: str, **arguments: Any) -> Completion:
    return Completion(text=f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>")


ASK = UserTurn(content="Please set the balance of a1 to 20.")
BYE = UserTurn(content="Thanks!", stop=True)
