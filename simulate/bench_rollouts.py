"""GRPO-shaped rollouts for `arena bench model`: how many episodes an hour the local engine samples.

The shape is the CPU demo's GRPO step: `groups` tasks, `group_size` samples of each, sampled at
temperature 1 with log-probabilities and grammar-constrained tool calls (the trainer's rollout
settings), each episode `turns` turns of at most `turn_tokens` tokens. The first prompt holds a
system prompt, twelve tools (about the embedded template's size for a bundled environment) and a
task; every later turn appends the policy's reply and a tool result, so prefills reuse the cached
prefix as real episodes do. Nothing is verified or trained: the figure is the sampling side of
GRPO's episodes per hour, the part the engine decides.
"""

from __future__ import annotations

import time

import anyio

from arena.types import Message, SamplingParams, ToolSpec
from simulate.bench import RolloutRun
from simulate.local import LocalChatModel

_ENTITIES = ["order", "customer", "product", "invoice", "shipment", "ticket"]


def bench_tools() -> list[ToolSpec]:
    """Twelve tools shaped like a bundled environment's (a lookup and an update per entity)."""
    tools = []
    for entity in _ENTITIES:
        key = {"type": "string", "description": f"The {entity}'s id, as a lookup returns it."}
        tools.append(
            ToolSpec(
                name=f"get_{entity}",
                description=f"Look up one {entity} by its id and return all of its fields.",
                parameters={
                    "type": "object",
                    "properties": {f"{entity}_id": key},
                    "required": [f"{entity}_id"],
                },
            )
        )
        tools.append(
            ToolSpec(
                name=f"update_{entity}_status",
                description=f"Set the status of one {entity}; returns the {entity} as stored afterwards.",
                parameters={
                    "type": "object",
                    "properties": {
                        f"{entity}_id": key,
                        "status": {"type": "string", "enum": ["open", "pending", "closed", "cancelled"]},
                        "note": {"type": "string", "description": "Why the status changed."},
                    },
                    "required": [f"{entity}_id", "status"],
                },
            )
        )
    return tools


def _task(group: int) -> list[Message]:
    entity = _ENTITIES[group % len(_ENTITIES)]
    return [
        Message(
            role="system",
            content="You are a support agent. Use the tools to look things up and to make changes; "
            "call one tool at a time and answer the user when the work is done.",
        ),
        Message(
            role="user",
            content=f"My {entity} {1000 + group} was charged twice. Please check it and close it "
            f"with a note saying why (task #{group}).",
        ),
    ]


def _tool_result(turn: int) -> Message:
    fields = ", ".join(f'"field_{k}": "value {turn}-{k}"' for k in range(12))
    return Message(role="tool", content="{" + fields + "}", tool_call_id=f"call_{turn}", name="get_order")


async def bench_rollouts(
    model: LocalChatModel,
    precision: str,
    *,
    groups: int = 2,
    group_size: int = 4,
    turns: int = 3,
    turn_tokens: int = 128,
    seed: int = 0,
) -> RolloutRun:
    """Sample `groups` × `group_size` episodes concurrently and time them."""
    tools = bench_tools()
    prompt_tokens = len(model.render_prompt(_task(0), tools))
    tokens = 0

    async def episode(group: int, sample: int) -> None:
        nonlocal tokens
        messages = _task(group)
        for turn in range(turns):
            params = SamplingParams(
                temperature=1.0,
                logprobs=True,
                constrain_tool_calls=True,
                max_tokens=turn_tokens,
                seed=seed + 1000 * group + 10 * sample + turn,
            )
            completion = await model.chat(messages, tools=tools, params=params)
            tokens += len(completion.completion_token_ids or [])
            messages = [*messages, Message(role="assistant", content=completion.text), _tool_result(turn)]

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for group in range(groups):
            for sample in range(group_size):
                tg.start_soon(episode, group, sample)
    wall = time.perf_counter() - started
    episodes = groups * group_size
    return RolloutRun(
        precision=precision,
        groups=groups,
        group_size=group_size,
        turns=turns,
        turn_tokens=turn_tokens,
        prompt_tokens=prompt_tokens,
        episodes=episodes,
        completion_tokens=tokens,
        wall_s=round(wall, 2),
        episodes_per_hour=round(3600 * episodes / wall, 1),
        tokens_per_s=round(tokens / wall, 2),
    )
