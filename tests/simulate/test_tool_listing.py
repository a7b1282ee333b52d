"""The embedded model's chat template lists tools as signatures: every fact of the schema, fewer tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arena.env.registry import Registry
from simulate.chat_format import render_chat

pytestmark = pytest.mark.model  # the converted embedded model's tokenizer and template


@pytest.fixture(scope="module")
def tokenizer(embedded_model_path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_model_path))


def listing(tokenizer: Any, tools: list[dict[str, Any]] | None) -> str:
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Hello."}]
    return render_chat(tokenizer, messages, tools, {}, add_generation_prompt=True)


def test_every_bundled_tool_shows_its_name_arguments_and_descriptions(tokenizer: Any) -> None:
    for name, env in Registry().load_all().items():
        text = listing(tokenizer, [t.openai() for t in env.tool_specs])
        for tool in env.tool_specs:
            props = tool.parameters.get("properties", {})
            required = tool.parameters.get("required", [])
            signature = ", ".join(k if k in required else f"{k}?" for k in props)
            assert f"\n{tool.name}({signature})" in text, (name, tool.name)
            assert tool.description in text, (name, tool.name)
            for key, schema in props.items():
                assert f"\n  {key} (" in text, (name, tool.name, key)
                assert schema.get("description", "") in text, (name, tool.name, key)


def test_types_enums_references_and_unions_render_in_a_few_tokens(tokenizer: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "units": {"type": "string", "enum": ["metric", "imperial"], "description": "Unit system"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "count": {"type": ["integer", "null"]},
            "tree": {"$ref": "#/$defs/Tree"},
            "anything": {},
        },
        "required": ["lines"],
        "$defs": {
            "Line": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["id"],
            },
            "Tree": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Tree"}}},
        },
    }
    text = listing(
        tokenizer,
        [{"type": "function", "function": {"name": "f", "description": "Does f.", "parameters": schema}}],
    )
    assert "\nf(units?, lines, note?, count?, tree?, anything?): Does f.\n" in text
    assert '\n  units ("metric" | "imperial"): Unit system\n' in text
    assert "\n  lines (array of {id: string, qty?: integer})\n" in text
    assert "\n  note (string | null)\n  count (integer | null)\n" in text
    assert "\n  tree ({child?: {child?: any}})\n" in text  # a schema that refers to itself stops
    assert "\n  anything (any)\n" in text
    # A flat tool object (no "function" wrapper) and one without parameters render too.
    assert "\ng(): Does g.\n" in listing(tokenizer, [{"name": "g", "description": "Does g."}])


def test_the_listing_costs_under_two_thirds_of_the_json_schemas_tokens(tokenizer: Any) -> None:
    import json

    bare = len(tokenizer(listing(tokenizer, None)).input_ids)
    for name, env in Registry().load_all().items():
        tools = [t.openai() for t in env.tool_specs]
        listed = len(tokenizer(listing(tokenizer, tools)).input_ids) - bare
        as_json = len(tokenizer("\n".join(json.dumps(t, ensure_ascii=False) for t in tools)).input_ids)
        assert listed < as_json * 2 / 3, (name, listed, as_json)
