"""The agent's grammar-constrained answer: a nested schema sized to the per-call cap, and its flattening."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from arena.env.registry import Registry
from diagnose.agent import DiagnosisConfig, run_diagnosis
from diagnose.evidence import EnvMeta, build_evidence
from diagnose.report import draft_schema, flatten_draft, schema_sizes, validate_draft
from diagnose.wiring import episode_id

from .test_agent import ScriptedFakeHelper, _evidence

pytestmark = pytest.mark.anyio


def nested_answer(env: str = "shop", tools: tuple[str, ...] = ("cancel_order",)) -> dict:
    return {
        "summary": "cancels the wrong order",
        "weak_envs": [
            {
                "env": env,
                "score": 0.8,
                "evidence": "4 of 5 failed",
                "motif": "id_chaining",
                "pattern": {
                    "category": "wrong_entity",
                    "description": "wrong order",
                    "tools": list(tools),
                    "episode_ids": ["shop/t1#0"],
                },
                "guideline": {
                    "failure_pattern": "wrong order cancelled",
                    "skill": "read the id, then act on it",
                    "target_tools": ["get_order", "cancel_order"],
                    "difficulty": {
                        "walk_length": 2,
                        "ambiguity": 1,
                        "weak_edge_share": 0,
                        "distractors": 0,
                        "conversational": 0,
                    },
                    "n_tasks": 3,
                },
            }
        ],
    }


def test_nested_answer_flattens_into_a_valid_draft_with_its_motif(b: SimpleNamespace) -> None:
    ev, _ = _evidence(b)
    draft = validate_draft(json.dumps(nested_answer()), ev)
    assert [w.env for w in draft.weak_envs] == ["shop"]
    assert draft.guidelines[0].env == "shop" and draft.guidelines[0].motif == "id_chaining"
    assert draft.patterns[0].env == "shop" and draft.patterns[0].episode_ids == ["shop/t1#0"]
    # The flat form passes through untouched.
    flat = {"summary": "", "weak_envs": [], "patterns": [], "guidelines": []}
    assert flatten_draft(flat) is flat


def test_schema_allows_only_failing_envs_with_their_own_tools_and_episodes(b: SimpleNamespace) -> None:
    ev, _ = _evidence(b)
    schema = draft_schema(ev, max_items=3, text_chars=50)
    item = schema["properties"]["weak_envs"]["items"]
    # Only `shop` failed: a single alternative, its environment fixed, its ids and tools as enums.
    assert item["properties"]["env"] == {"type": "string", "const": "shop"}
    pattern = item["properties"]["pattern"]["properties"]
    assert set(pattern["episode_ids"]["items"]["enum"]) == {f"shop/t1#{i}" for i in range(4)}
    assert "cancel_order" in pattern["tools"]["items"]["enum"]
    assert item["properties"]["evidence"]["pattern"].endswith("{0,50}")
    assert schema["properties"]["weak_envs"]["maxItems"] == 1  # one failing environment


def test_schema_sizes_fit_the_per_call_cap() -> None:
    items, chars = schema_sizes(800, 5)
    assert items == 1 and 8 <= chars < 240
    assert schema_sizes(4000, 5)[0] > schema_sizes(800, 5)[0]


def _longest(schema: dict, tokens) -> object:
    """The instance of `schema` that costs the most tokens (text: digits, one token each)."""
    if "anyOf" in schema:
        return max((_longest(s, tokens) for s in schema["anyOf"]), key=lambda v: tokens(json.dumps(v)))
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: tokens(json.dumps(v)))
    kind = schema.get("type")
    if kind == "object":
        return {k: _longest(v, tokens) for k, v in schema["properties"].items()}
    if kind == "array":
        return [_longest(schema["items"], tokens)] * schema.get("maxItems", 1)
    if kind == "string":
        return "1" * int(re.search(r"\{0,(\d+)\}$", schema["pattern"]).group(1))
    if kind == "integer":
        return schema["maximum"]
    return 0.1234567  # a bounded number: xgrammar allows at most seven decimals


@pytest.mark.parametrize("max_tokens", [800, 1000, 1500, 2500, 4000])
def test_the_longest_answer_the_grammar_allows_fits_the_cap(
    b: SimpleNamespace, embedded_model_path, max_tokens: int
) -> None:
    """Over the bundled environments' real tool names and episode ids, with every field at its
    longest, the answer has at most `max_tokens` characters: every one of them a token of its own
    (as a small model may spell it) still ends within the cap."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)

    def tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    # The worst case is one token per character: no token of the allowed text is shorter.
    assert all(tokens(chr(c)) == 1 for c in range(32, 127))
    envs = {n: e for n, e in Registry().load_all().items() if e.kind == "executable"}
    eps = []
    for name, env in envs.items():
        task = b.task(name, reference=[(env.tool_names[0], {})], tid="ys-medium-g-s217377-00001")
        transcript = b.transcript([b.call(env.tool_names[0])], env=name)
        eps += [
            b.episode(f"{name}/ys-medium-g-s217377-0000{i}#0", transcript, b.verdict(), task, env=name)
            for i in range(4)
        ]
    evidence = build_evidence(1, eps, {n: EnvMeta.from_environment(e) for n, e in envs.items()})
    items, chars = schema_sizes(max_tokens, 5)
    answer = _longest(draft_schema(evidence, max_items=items, text_chars=chars), lambda v: len(v))
    text = json.dumps(answer, separators=(", ", ": "))
    assert text.isascii() and len(text) <= max_tokens


def test_schema_compiles_to_a_grammar(b: SimpleNamespace) -> None:
    xgr = pytest.importorskip("xgrammar")
    ev, _ = _evidence(b)
    xgr.Grammar.from_json_schema(json.dumps(draft_schema(ev, max_items=2, text_chars=40)))


async def test_a_prose_answer_is_followed_by_a_constrained_call_sized_to_the_cap(b: SimpleNamespace) -> None:
    ev, eps = _evidence(b)
    helper = ScriptedFakeHelper(["The shop environment is weak.", json.dumps(nested_answer())])
    config = DiagnosisConfig(max_calls=2, max_tokens_per_call=800)
    report = await run_diagnosis(ev, eps, helper=helper, sandbox=None, config=config)
    assert report.source == "agent", report.fallback_reason
    assert report.guidelines[0].motif == "id_chaining"
    _, _, params = helper.requests[-1]
    assert params is not None and params.json_schema is not None and params.max_tokens == 800
    text = params.json_schema["properties"]["summary"]
    assert text["pattern"].endswith(f"{{0,{schema_sizes(800, 5)[1]}}}")


def test_episode_ids_name_the_environment_once() -> None:
    assert episode_id("food_delivery", "food_delivery/g-s1-00001", 0) == "food_delivery/g-s1-00001#0"
    assert episode_id("food_delivery", "g-s1-00001", 2) == "food_delivery/g-s1-00001#2"
