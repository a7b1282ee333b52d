"""A few real episodes with the embedded 135M model on a small executable environment.

They show that the runner copes with what a tiny model really emits (and that the token record is
consistent with the real tokenizer and template); they do not expect the model to succeed. Kept
short: a handful of turns with small token budgets (the model makes ~15 tokens/s on CPU), on the
three-tool notes environment of the MCP tests, whose prompt is a few hundred tokens (a bundled
environment's dozen tool schemas make a 2,000-token prompt, too slow to prefill here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.env.loader import load_environment
from arena.episode.prompts import system_prompt_for
from arena.episode.runner import EpisodeConfig, run_episode
from arena.episode.transcript import Transcript
from arena.episode.users import ScriptedUser
from arena.protocols import UserContext

pytestmark = pytest.mark.model

NOTES_ENV = Path(__file__).parents[1] / "mcp" / "fixtures" / "notes"


@pytest.fixture(scope="module")
def policy(embedded_model_path: Path) -> Any:
    from simulate.local import LocalChatModel

    return LocalChatModel.load(embedded_model_path, device="cpu", name="embedded")


def check_consistent(t: Transcript) -> None:
    assert t.turns, "the policy was called at least once"
    Transcript.model_validate_json(t.model_dump_json())
    assert t.tokens_complete
    for chain in t.chains:
        ids, mask, lps = chain.completion_ids(), chain.mask(), chain.logprobs()
        assert len(ids) == len(mask) == len(lps)
        assert sum(mask) == sum(len(s.token_ids) for s in chain.segments if s.kind == "policy")
    # Every sampled token is in exactly one chain.
    assert sum(sum(c.mask()) for c in t.chains) == t.usage.completion_tokens
    # Malformed calls are counted, never raised; every executed call has a result.
    assert t.malformed_calls == len(t.malformed_errors)
    assert all(c.result.tool == c.call.name for c in t.calls)


def test_real_model_conversational_episode(policy: Any) -> None:
    """One conversational episode: two policy turns around a scripted user turn."""
    env = load_environment(NOTES_ENV)
    config = EpisodeConfig(max_turns=2, max_tokens_per_turn=24, max_total_tokens=4000)

    class Task:
        id = "real-chat"
        env = "mcp_notes"
        instruction = "Hi, please list my notes."
        mode = "conversational"
        user = UserContext(intent="see the titles of my notes, then add a note titled 'Call mum'")

    async def main() -> Transcript:
        instance = env.new_instance()
        try:
            return await run_episode(
                policy,
                instance,
                Task(),
                user=ScriptedUser(["Thanks. Now add a note titled 'Call mum'."]),
                config=config,
                system_prompt=system_prompt_for(env, "conversational"),
            )
        finally:
            await instance.aclose()

    t = anyio.run(main)
    check_consistent(t)
    assert t.finish in {"user_stop", "max_turns", "max_tokens"}
    print(
        {
            "finish": t.finish,
            "turns": [turn.text for turn in t.turns],
            "calls": len(t.calls),
            "malformed": [e.error.kind for e in t.malformed_errors],
            "chains": len(t.chains),
            "breaks": [b.model_dump() for b in t.chain_breaks],
            "model_s": round(t.timings.model_s, 1),
        }
    )
