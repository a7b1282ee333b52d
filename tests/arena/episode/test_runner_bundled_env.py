"""The runner on a real bundled environment (food_delivery), driven by a scripted fake model."""

from __future__ import annotations

from typing import Any

import anyio

from arena.env.registry import Registry
from arena.episode.prompts import system_prompt_for
from arena.episode.runner import run_episode


def test_runner_on_food_delivery(fakes: Any) -> None:
    env = Registry(include_environ=False).get("food_delivery")
    model = fakes.Model(
        [
            fakes.call("get_menu", {"restaurant_id": "R-99"}),  # the tool refuses
            fakes.call("cancel_order", {"order_id": 1002}),  # wrong argument type
            "Cancelling now." + fakes.call("cancel_order", {"order_id": "ORD-1002", "reason": "mistake"}),
            "Order ORD-1002 is cancelled.",
        ]
    )
    task = fakes.Task(instruction="I ordered ORD-1002 by mistake, please cancel it.", env="food_delivery")

    async def main() -> Any:
        instance = env.new_instance()
        try:
            t = await run_episode(model, instance, task, system_prompt=system_prompt_for(env))
            return t, instance.diff()
        finally:
            await instance.aclose()

    t, diff = anyio.run(main)
    assert t.finish == "answered" and t.final_answer == "Order ORD-1002 is cancelled."
    assert [(c.call.name, c.result.ok, c.result.error_kind) for c in t.calls] == [
        ("get_menu", False, "tool_error"),
        ("cancel_order", False, "invalid_arguments"),
        ("cancel_order", True, None),
    ]
    assert t.tool_stats["cancel_order"].ok == 1 and t.tool_stats["cancel_order"].failed == 1
    assert t.malformed_calls == 0
    assert "orders" in diff.tables
    # The environment's rules and time reach the policy through the system prompt.
    system = model.calls[0][0].content
    assert "cancelled only while its status is" in system and env.now in system
    # The policy was offered exactly the environment's tools.
    assert model.tools_seen == [env.tool_specs] * 4
