"""Tool-graph motifs: the shapes of work a task asks for, in terms every environment can share.

Arena environments are held out of training and no two environments share a tool name, so a
weakness named by tool cannot transfer. A motif names the *shape* instead (Agent-World's skills,
EnvFactory's graph patterns): reading an id and acting on it, finding a record by an attribute
that is not its key, filtering on several constraints, answering from a list, making several
changes, or working out the intent with a user. Every motif has three readings:

- `task_motifs(task, write_tools)`: which motifs a task's reference solution exercises (the
  diagnosis measures pass rates per motif; SYNTHESIZE counts what it produced);
- `env_motif_tools(env)`: which tools of an environment can exercise a motif (PLAN maps a weak
  motif onto every training environment that has it, whatever its category);
- `motif_difficulty(motif, base)`: the knob levels a targeted walk needs for the motif to appear.

All three read only tool schemas and reference calls, so they are cheap and deterministic.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Literal, get_args

from arena.difficulty import Difficulty
from arena.synth.values import is_id_like

MotifName = Literal[
    "id_chaining",
    "non_key_lookup",
    "multi_constraint_filter",
    "aggregation",
    "multi_write",
    "confirm_with_user",
]
MOTIFS: tuple[MotifName, ...] = get_args(MotifName)

DESCRIPTIONS: dict[MotifName, str] = {
    "id_chaining": "read a record's id with one tool and act on it with a write (read -> write)",
    "non_key_lookup": "find a record by an attribute that is not its key (a name, a city, a query)",
    "multi_constraint_filter": "search with several constraints at once",
    "aggregation": "answer from a list of records (count, compare, pick) without changing anything",
    "multi_write": "make several changes in one task",
    "confirm_with_user": "work out the intent with the user before acting (conversational)",
}

# Arguments that page or cap results: they constrain nothing the user cares about.
_PAGING = {"limit", "offset", "page", "page_size"}


def _schema_params(spec: Any) -> tuple[dict[str, dict[str, Any]], set[str]]:
    schema = spec.parameters or {}
    return dict(schema.get("properties", {})), set(schema.get("required", []))


def _filters(names: Iterable[str]) -> list[str]:
    """The argument names that constrain a search: neither ids nor paging."""
    return [n for n in names if not is_id_like(n) and n not in _PAGING]


def env_motif_tools(env: Any) -> dict[MotifName, list[str]]:
    """Per motif the environment can exercise, the tools a targeted walk should favour.

    Only executable environments have tool graphs to walk; a simulated one has no motif here.
    """
    if getattr(env, "kind", "executable") != "executable":
        return {}
    writes = set(env.write_tools)
    specs = list(env.tool_specs)
    reads = [s for s in specs if s.name not in writes]
    out: dict[MotifName, list[str]] = {}
    chained = []
    lookups, filtered, listings = [], [], []
    for spec in specs:
        props, required = _schema_params(spec)
        if spec.name in writes:
            if any(is_id_like(p) for p in required):
                chained.append(spec.name)
            continue
        filters = _filters(props)
        required_ids = [p for p in required if is_id_like(p)]
        if filters and not required_ids:
            lookups.append(spec.name)
        if len(filters) >= 2:
            filtered.append(spec.name)
        if not required_ids:
            listings.append(spec.name)
    if chained and reads:
        out["id_chaining"] = chained
    if lookups:
        out["non_key_lookup"] = lookups
    if filtered:
        out["multi_constraint_filter"] = filtered
    if listings:
        out["aggregation"] = listings
    if len(writes) >= 2:
        out["multi_write"] = sorted(writes)
    if writes:
        out["confirm_with_user"] = []  # any environment with writes; the knob does the work
    return out


def task_motifs(task: Any, write_tools: Collection[str]) -> list[MotifName]:
    """The motifs a task's reference solution exercises (in `MOTIFS` order)."""
    calls = list(task.reference)
    writes = [c for c in calls if c.name in write_tools]
    found: set[MotifName] = set()
    seen_read = False
    for call in calls:
        args = call.arguments or {}
        ids = [k for k in args if is_id_like(k)]
        if call.name in write_tools:
            if seen_read and ids:
                found.add("id_chaining")
            continue
        seen_read = True
        filters = _filters(args)
        if filters and not ids and any(isinstance(args[k], str) for k in filters):
            found.add("non_key_lookup")
        if len(filters) >= 2:
            found.add("multi_constraint_filter")
    last = calls[-1] if calls else None
    answers = any(getattr(c, "kind", "") == "answer" for c in task.checks)
    if last is not None and not writes and answers and not any(is_id_like(k) for k in (last.arguments or {})):
        found.add("aggregation")
    if len(writes) >= 2:
        found.add("multi_write")
    if getattr(task, "mode", "autonomous") == "conversational":
        found.add("confirm_with_user")
    return [m for m in MOTIFS if m in found]


def motif_difficulty(motif: MotifName, base: Difficulty) -> Difficulty:
    """`base` with the knobs a walk needs for `motif` to show up (never lower than `base`)."""
    need: dict[str, int] = {
        "id_chaining": {"walk_length": 2},
        "multi_write": {"walk_length": 3},
        "confirm_with_user": {"conversational": 1},
    }.get(motif, {})
    out = base
    for knob, level in need.items():
        if out.level(knob) < level:  # type: ignore[arg-type]
            out = out.with_level(knob, level)  # type: ignore[arg-type]
    if motif == "aggregation":
        # A single read is the walk's goal: a longer walk would go on to a write after it.
        out = out.with_level("walk_length", 1)
    return out
