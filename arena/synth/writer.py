"""Instructions for executed walks: a deterministic template writer and a helper-model writer.

Both write what a user would say: no tool names, no parameter names, no schema words. Ambiguity
sets how the user refers to things: 0 by explicit id, 1 by name-like attributes read from the
database ("the order from Luigi's Trattoria"), 2 by the goal only (one attribute, no steps).
Free-text and numeric values the final state depends on are always quoted, whatever the
ambiguity, or no agent could reach the reference state. The model writer's output is validated
against the same rules; a rejected one falls back to the template.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Literal

import structlog
from pydantic import BaseModel, Field

from arena.difficulty import Difficulty
from arena.protocols import ChatModel, ModelError
from arena.synth.cost import StageMeter
from arena.synth.entities import EntityIndex, entity_index, humanize
from arena.synth.graph import ToolGraph
from arena.synth.values import is_id_like
from arena.synth.walk import Walk
from arena.types import Message, SamplingParams

log = structlog.get_logger(__name__)

SCHEMA_WORDS = ("tool", "function", "parameter", "argument", "json", "schema", "api", "endpoint")
PERSONAS = [
    "a busy professional who writes short, direct messages",
    "a polite retiree who likes to double-check everything",
    "a student on a budget, casual and friendly",
    "a frequent customer who knows the service well",
    "a parent juggling errands, a little rushed",
]
_READ_VERBS = {
    "get",
    "list",
    "search",
    "find",
    "check",
    "show",
    "view",
    "look",
    "read",
    "fetch",
    "see",
    "count",
}
_SUBJECT_WORDS = re.compile(
    r"\b(?:the (?:user|customer|patient|member|account holder|patron|traveler|guest)'s)\b", re.I
)
_SUBJECT_PLAIN = re.compile(
    r"\b(?:the (?:user|customer|patient|member|account holder|patron|traveler|guest))\b", re.I
)


class TaskDraft(BaseModel):
    """What a writer produces for one walk."""

    instruction: str
    answer: str
    answer_values: list[str] = Field(default_factory=list)
    intent: str
    persona: str = ""
    rubric: list[str] = Field(default_factory=list)
    writer: Literal["template", "model"] = "template"


def _first_person(summary: str) -> str:
    text = summary.strip().rstrip(".")
    text = _SUBJECT_WORDS.sub("my", text)
    text = _SUBJECT_PLAIN.sub("me", text)
    return text[:1].lower() + text[1:]


def _fmt(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_fmt(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{humanize(k)} {_fmt(v)}" for k, v in value.items())
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value if is_id_like(value) or " " not in value else f'"{value}"'
    return str(value)


def _is_id_value(param: str, value: Any, index: EntityIndex) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_is_id_value(param, v, index) for v in value)
    return isinstance(value, str) and (is_id_like(param) or value in index.rows)


class _Mention(BaseModel):
    phrase: str
    must_include: list[str] = Field(default_factory=list)
    hidden_ids: list[str] = Field(default_factory=list)


def _mention(walk: Walk, step_i: int, param: str, value: Any, ambiguity: int, index: EntityIndex) -> _Mention:
    """How the user refers to one argument value."""
    label = humanize(param)
    step = walk.steps[step_i]
    src = step.sources.get(param)
    if _is_id_value(param, value, index):
        ids = [str(v) for v in (value if isinstance(value, list) else [value])]
        if src is not None and walk.steps[src].writes and not any(v in index.rows for v in ids):
            # Created earlier in this task: the user cannot know its id yet.
            return _Mention(phrase=f"the new {label}", hidden_ids=ids)
        if ambiguity == 0:
            return _Mention(phrase=f"{label} {_fmt(value)}", must_include=ids)
        described = [index.describe(v) for v in ids]
        if all(described):
            return _Mention(phrase=" and ".join(d for d in described if d), hidden_ids=ids)
        return _Mention(phrase=f"{label} {_fmt(value)}", must_include=ids)
    text = _fmt(value)
    include = [
        str(v) for v in (value if isinstance(value, list) else [value]) if not isinstance(v, dict | bool)
    ]
    return _Mention(phrase=f"{label} {text}", must_include=include)


def _answer_fields(output: Any, instruction_values: set[str]) -> list[tuple[str, str]]:
    """Up to two (field, value) pairs of a result worth asking for."""
    if not isinstance(output, dict):
        return []
    lists = [k for k, v in output.items() if isinstance(v, list)]
    if lists and isinstance(output.get("count"), int) and not isinstance(output.get("count"), bool):
        return [(f"number of {humanize(lists[0])}", str(output["count"]))]
    picked: list[tuple[str, str]] = []
    for key, value in output.items():
        if isinstance(value, bool) or value is None or isinstance(value, dict | list):
            continue
        text = str(value)
        if (
            not text.strip()
            or len(text) > 40
            or text in instruction_values
            or text.lower() in ("true", "false")
        ):
            continue
        picked.append((key, text))
    # Descriptive fields first, then ids: "status" says more than "order_id".
    picked.sort(key=lambda kv: is_id_like(kv[0]))
    return picked[:2]


def template_draft(
    env: Any, graph: ToolGraph, walk: Walk, difficulty: Difficulty, rng: random.Random
) -> TaskDraft:
    """The deterministic instruction, answer and rubric for a walk."""
    index = entity_index(env)
    ambiguity = difficulty.ambiguity
    sentences: list[str] = []
    mentioned: set[str] = set()
    last = len(walk.steps) - 1
    for i, step in enumerate(walk.steps):
        if not step.writes and i != last:
            continue  # lookups are the agent's business
        if not step.writes:
            continue  # the final read becomes the question below
        mentions = [
            _mention(walk, i, p, v, ambiguity, index)
            for p, v in step.arguments.items()
            if v not in ("", [], None)
        ]
        if ambiguity == 2:
            # Goal only: ids by at most one description; values the state depends on stay.
            described = [m for m in mentions if m.hidden_ids]
            mentions = [m for m in mentions if not m.hidden_ids] + described[:1]
        for m in mentions:
            mentioned.update(m.must_include)
        detail = "; ".join(m.phrase for m in mentions)
        verb = _first_person(graph.nodes[step.tool].summary)
        sentences.append(f"{verb}" + (f" ({detail})" if detail else ""))
    final = walk.steps[last]
    instruction_values = {
        str(v) for s in walk.steps for v in s.arguments.values() if not isinstance(v, list | dict)
    }
    fields = _answer_fields(final.output, instruction_values)
    question = ""
    if fields:
        wanted = " and ".join(
            f"the {humanize(k)}" if not k.startswith("number of") else f"the {k}" for k, _ in fields
        )
        about = ""
        if not final.writes:
            reads = [
                _mention(walk, last, p, v, ambiguity, index)
                for p, v in final.arguments.items()
                if v not in ("", [], None)
            ]
            for m in reads:
                mentioned.update(m.must_include)
            if reads:
                about = " for " + "; ".join(m.phrase for m in reads)
            verb = _first_person(graph.nodes[final.tool].summary)
            if verb.split(" ", 1)[0] not in _READ_VERBS:
                verb = f"look up {verb}"  # summaries like "Full details of ..." have no verb
            question = f"{verb}{about}, and tell me {wanted}"
        else:
            question = f"tell me {wanted}"
    if ambiguity == 0 and len(sentences) > 1:
        body = "first " + ", then ".join(sentences)
    else:
        body = ", and ".join(sentences)
    parts = [p for p in (body, question) if p]
    if not parts:
        parts = [_first_person(graph.nodes[final.tool].summary)]
    instruction = "Please " + ". Then ".join(parts) + "."
    values = [v for _, v in fields]
    if fields:
        answer = (
            "Done. "
            + "; ".join(f"{humanize(k) if not k.startswith('number of') else k}: {v}" for k, v in fields)
            + "."
        )
    else:
        answer = "Done: everything you asked for is taken care of."
    rubric = [f"The assistant does what the user asked: {instruction}"]
    if fields:
        rubric.append("The assistant reports the requested details accurately in its final answer.")
    return TaskDraft(
        instruction=instruction,
        answer=answer,
        answer_values=values,
        intent=instruction,
        persona=rng.choice(PERSONAS),
        rubric=rubric,
        writer="template",
    )


def forbidden_words(env: Any, graph: ToolGraph) -> list[str]:
    """Tool names and underscore parameter names: words a user would never write."""
    words = list(graph.nodes)
    for node in graph.nodes.values():
        words.extend(p for p in node.params if "_" in p)
    return words


def validate_instruction(
    text: str, env: Any, graph: ToolGraph, draft: TaskDraft, walk: Walk, difficulty: Difficulty
) -> str | None:
    """Why a written instruction is unusable, or None when it is fine."""
    if not isinstance(text, str) or not 15 <= len(text.strip()) <= 1200:
        return "instruction must be 15 to 1200 characters"
    low = text.lower()
    for word in forbidden_words(env, graph):
        if re.search(rf"\b{re.escape(word.lower())}\b", low):
            return f"mentions the internal name {word!r}"
    for word in SCHEMA_WORDS:
        if re.search(rf"\b{word}s?\b", low):
            return f"uses the schema word {word!r}"
    index = entity_index(env)
    for i, step in enumerate(walk.steps):
        if not step.writes and i != len(walk.steps) - 1:
            continue
        for p, v in step.arguments.items():
            m = _mention(walk, i, p, v, difficulty.ambiguity, index)
            for value in m.must_include:
                if value.lower() not in low:
                    return f"leaves out the value {value!r}"
            if difficulty.ambiguity > 0:
                for value in m.hidden_ids:
                    if value.lower() in low:
                        return f"names the id {value!r} at ambiguity {difficulty.ambiguity}"
    return None


_MODEL_SCHEMA = {
    "type": "object",
    "properties": {
        "instruction": {"type": "string"},
        "persona": {"type": "string"},
        "rubric": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["instruction", "persona", "rubric"],
}


async def model_draft(
    helper: ChatModel,
    env: Any,
    graph: ToolGraph,
    walk: Walk,
    difficulty: Difficulty,
    fallback: TaskDraft,
    meter: StageMeter,
    *,
    max_tokens: int = 320,
    guidance: str = "",
) -> tuple[TaskDraft, str | None]:
    """A helper-written draft, or the template `fallback` and the reason the model's was rejected."""
    steps = []
    for step in walk.steps:
        args = ", ".join(f"{humanize(k)} = {_fmt(v)}" for k, v in step.arguments.items())
        steps.append(f"- {graph.nodes[step.tool].summary} ({args})")
    style = [
        "refer to things by their ids",
        "refer to things by name or description, never by id",
        "state only the goal",
    ][difficulty.ambiguity]
    prompt = (
        f"You write requests that a customer of {env.title} sends to its support assistant.\n"
        f"About the service: {env.description.strip()}\n"
        f"The assistant will do these steps:\n" + "\n".join(steps) + "\n"
        f"Write the customer's request in the first person; {style}. Quote every free-text or number value"
        " exactly. Never mention functions, tools or field names."
        + (
            f" Also ask for: {', '.join(humanize(v) for v in fallback.answer_values)}."
            if fallback.answer_values
            else ""
        )
        + (f"\nFocus: {guidance}" if guidance else "")
        + '\nAnswer with JSON: {"instruction": "...", "persona": "...", "rubric": ["criterion", ...]}'
    )
    params = SamplingParams(max_tokens=max_tokens, temperature=0.7, json_schema=_MODEL_SCHEMA)
    try:
        completion = await meter.chat(
            helper, [Message(role="user", content=prompt)], params=params, stage="writer"
        )
        data = json.loads(completion.text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        instruction = str(data.get("instruction", "")).strip()
        persona = str(data.get("persona", "")).strip()[:300]
        rubric = [str(c).strip() for c in data.get("rubric", []) if str(c).strip()][:4]
    except (ModelError, ValueError, TypeError) as exc:
        return fallback, f"unusable output: {str(exc)[:120]}"
    problem = validate_instruction(instruction, env, graph, fallback, walk, difficulty)
    if problem is None and fallback.answer_values:
        wanted_ok = any(w in instruction.lower() for w in ("tell", "let me know", "?", "what", "how many"))
        problem = None if wanted_ok else "does not ask for the details the answer must give"
    if problem is not None:
        return fallback, problem
    return (
        fallback.model_copy(
            update={
                "instruction": instruction,
                "intent": instruction,
                "persona": persona or fallback.persona,
                "rubric": rubric or fallback.rubric,
                "writer": "model",
            }
        ),
        None,
    )
