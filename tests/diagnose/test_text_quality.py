"""Free text of the diagnosis agent: noise is replaced by text from the evidence, sense is kept."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from diagnose.agent import run_diagnosis
from diagnose.fallback import fallback_report
from diagnose.text_quality import readable
from tests.diagnose.test_agent import ScriptedFakeHelper, _evidence, good_report

pytestmark = pytest.mark.anyio

# What the embedded helper wrote in a three-round demo run (issue 40), and similar noise.
NOISE = [
    "123456789012345678901234567890123456789012345678",
    "mispirat_writ_wir_wir_wir_wir_wir_wir_wir",
    "ski_sli_sli_sli_sli_sli_sli",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "x y z",
    "",
    "!!!! ---- #### ~~~~ [[[[ ]]]] $$$$ %%%%",
    "the the the the the the the the",
]
SENSE = [
    "The agent cancels orders without checking their status first.",
    "food_delivery: 3 of 4 episodes failed (missing_write 2, wrong_answer 1), e.g. food_delivery/t-1#0",
    "4 of 5 failed with wrong_entity",
    "look up every record a write names instead of writing ids from memory",
]


@pytest.mark.parametrize("text", NOISE)
def test_noise_does_not_read_as_text(text: str) -> None:
    assert not readable(text)


@pytest.mark.parametrize("text", SENSE)
def test_sentences_read_as_text(text: str) -> None:
    assert readable(text)


def test_every_text_the_fallback_derives_reads_as_text(b: SimpleNamespace) -> None:
    evidence, _ = _evidence(b)
    report = fallback_report(evidence, reason="test")
    texts = [report.summary, *(w.evidence for w in report.weak_envs)]
    texts += [p.description for p in report.patterns]
    texts += [t for g in report.guidelines for t in (g.failure_pattern, g.skill)]
    assert texts and all(readable(t) for t in texts), [t for t in texts if not readable(t)]


async def test_noise_in_an_agent_report_is_replaced_by_text_from_the_evidence(b: SimpleNamespace) -> None:
    evidence, episodes = _evidence(b)
    draft = json.loads(good_report())
    draft["summary"] = NOISE[0]
    draft["weak_envs"][0]["evidence"] = NOISE[0]
    draft["patterns"][0]["description"] = NOISE[1]
    draft["guidelines"][0]["skill"] = NOISE[2]
    report = await run_diagnosis(evidence, episodes, helper=ScriptedFakeHelper([json.dumps(draft)]))
    assert report.source == "agent"
    assert report.replaced_text == [
        "summary",
        "weak_envs[0].evidence",
        "patterns[0].description",
        "guidelines[0].skill",
    ]
    assert report.weak_envs[0].evidence == "shop: 4 of 5 episodes failed (wrong_entity 4), e.g. shop/t1#0"
    description = report.patterns[0].description
    assert description.startswith("shop: the right tool on the wrong record") and "shop/t1#0" in description
    assert report.guidelines[0].skill == "resolve which record the user means before acting on it"
    # Fields that read as text stay the agent's own.
    assert report.guidelines[0].failure_pattern == "wrong order cancelled"
    assert all(readable(t) for t in (report.summary, description))


async def test_a_clean_agent_report_is_kept_word_for_word(b: SimpleNamespace) -> None:
    evidence, episodes = _evidence(b)
    report = await run_diagnosis(evidence, episodes, helper=ScriptedFakeHelper([good_report()]))
    assert report.replaced_text == [] and report.summary == "The agent cancels the wrong orders."


def test_a_repeated_tool_or_episode_is_named_once() -> None:
    """The 135M helper's constrained answers repeated items (`cancel_order` three times, one
    episode id three times, a target tool four times); the report keeps each once, in order."""
    from arena.synth.targeted import Guideline
    from diagnose.report import FailurePattern

    pattern = FailurePattern(
        category="missing_write",
        env="food_delivery",
        description="The cancellation was never made.",
        tools=["cancel_order", "cancel_order", "get_order", "cancel_order"],
        episode_ids=["food_delivery/t1#0", "food_delivery/t1#0", "food_delivery/t2#0"],
    )
    assert pattern.tools == ["cancel_order", "get_order"]
    assert pattern.episode_ids == ["food_delivery/t1#0", "food_delivery/t2#0"]
    guideline = Guideline(env="food_delivery", target_tools=["search_restaurants"] * 4 + ["get_menu"])
    assert guideline.target_tools == ["search_restaurants", "get_menu"]
