"""Weighted walks over the tool graph, with prerequisite sampling, executed on a private copy.

Planning (EnvFactory's SamplePriors, Agent-World's weighted walk): pick a goal tool (a write when
the environment has one, weighted toward target tools), then for each internal input not yet
produced by the planned calls, add a producer (recursively, depth ≤ 3). Following EnvFactory's
prose rather than its Algorithm 2 line 9, an input that is already produced is skipped unless a
0.1 coin says to inject a prior anyway. The walk is then cut or extended to the difficulty's
length along graph edges: strong edges, or weak/independent ones with the probability the
`weak_edge_share` knob sets.

Execution runs each planned call on a fresh instance, drawing arguments from earlier outputs of
the walk (internal inputs) or from the value pools (external ones); a call that fails is retried
with other values a few times and otherwise dropped, so the recorded walk holds only calls that
succeed, with their outputs.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Collection
from typing import Any

from pydantic import BaseModel, Field

from arena.difficulty import Difficulty
from arena.synth.graph import EdgeKind, ParamInfo, ToolGraph, nested_names, sample_value
from arena.synth.values import fix_time_pairs, is_id_like, iter_fields, param_keys

PRIOR_DEPTH = 3
PRIOR_INJECTION = 0.1
CALL_TRIES = 6
EAGER_OPTIONAL = 0.8


class Step(BaseModel):
    """One executed call of a walk: what was called, with what, where each argument came from."""

    tool: str
    arguments: dict[str, Any]
    output: Any = None
    writes: bool = False
    # param -> index of the earlier step whose output provided the value (absent: the user gives it)
    sources: dict[str, int] = Field(default_factory=dict)


class Walk(BaseModel):
    """An executed walk: its steps and the kinds of the graph edges between consecutive steps."""

    steps: list[Step]
    edge_kinds: list[EdgeKind] = Field(default_factory=list)
    planned: list[str] = Field(default_factory=list)
    # Rows added, removed or changed between the initial and the final state (the net change).
    net_changed_rows: int = 0

    @property
    def has_write(self) -> bool:
        """Whether any executed step is a write."""
        return any(s.writes for s in self.steps)

    @property
    def writes_cancel_out(self) -> bool:
        """Whether the net change is smaller than the writes (one undoes or repeats another).

        Each successful write changes at least one row, so fewer changed rows than writes means
        some write left no trace in the final state, and only an action check can see it.
        """
        return self.net_changed_rows < sum(s.writes for s in self.steps)


def _weighted(rng: random.Random, items: list[str], weights: list[float]) -> str:
    return rng.choices(items, weights=weights, k=1)[0]


def plan_walk(
    graph: ToolGraph, rng: random.Random, difficulty: Difficulty, bias: dict[str, float] | None = None
) -> list[str]:
    """The tool names of one walk, `difficulty.walk_length` long when the graph allows."""
    bias = bias or {}
    length = difficulty.walk_length
    weak_share = difficulty.weak_edge_share / 4
    names = list(graph.nodes)
    writes = [n for n in names if graph.nodes[n].writes]
    # Targeted reads may be goals too; otherwise a goal is a write whenever there is one.
    pool = (writes + [n for n in names if bias.get(n, 1.0) > 1.0 and n not in writes]) or names
    goal = _weighted(rng, pool, [bias.get(n, 1.0) for n in pool])
    planned: set[str] = set()

    def priors(tool: str, depth: int) -> list[str]:
        out: list[str] = []
        for p in graph.nodes[tool].params.values():
            if not p.producers or (not p.required and rng.random() >= weak_share):
                continue
            provided = any(prod in planned for prod in p.producers)
            if (provided and rng.random() >= PRIOR_INJECTION) or depth == 0:
                continue
            prods = p.producers
            # Reads are the natural way to find a value; writes only produce new ones.
            weights = [(1.0 if graph.nodes[x].writes else 3.0) * bias.get(x, 1.0) for x in prods]
            prod = _weighted(rng, prods, weights)
            planned.add(prod)
            out.extend(priors(prod, depth - 1))
            out.append(prod)
        return out

    seq = [*priors(goal, PRIOR_DEPTH), goal][-length:]
    while len(seq) < length:
        edges = [(dst, kind, w) for dst, kind, w in graph.edges_from(seq[-1]) if dst != seq[-1]]
        if not edges:
            break
        strong = [e for e in edges if e[1] == "strong"]
        loose = [e for e in edges if e[1] != "strong"]
        group = loose if (rng.random() < weak_share and loose) or not strong else strong
        seq.append(_weighted(rng, [e[0] for e in group], [e[2] * bias.get(e[0], 1.0) for e in group]))
    return seq


def _walk_values(steps: list[Step], param: str) -> list[tuple[int, list[Any]]]:
    """Earlier outputs holding a value for `param`: (step index, values), most recent first."""
    keys = param_keys(param)
    found: list[tuple[int, list[Any]]] = []
    for i in range(len(steps) - 1, -1, -1):
        values = [v for k, v in iter_fields(steps[i].output) if k in keys]
        if values:
            found.append((i, list(dict.fromkeys(values))))
    return found


def choose_args(
    graph: ToolGraph,
    tool: str,
    steps: list[Step],
    rng: random.Random,
    weak_share: float,
    *,
    eager: bool = False,
) -> tuple[dict[str, Any], dict[str, int]]:
    """Arguments for one call and the step each internal one came from.

    `eager` (a read that targeted synthesis aims at) fills its optional constraints most of the
    time: a search called without them exercises no lookup or filter at all.
    """
    args: dict[str, Any] = {}
    sources: dict[str, int] = {}

    def lookup(name: str) -> list[Any]:
        found = _walk_values(steps, name)
        return found[0][1] if found else []

    for p in graph.nodes[tool].params.values():
        nested = nested_names(p.schema_)
        from_walk = _walk_values(steps, p.name) if p.source == "internal" and not nested else []
        if not p.required:
            chance = (0.45 + 0.4 * weak_share) if from_walk else 0.25
            if p.schema_.get("type") == "boolean":
                chance = 0.15
            elif (
                eager and not is_id_like(p.name) and p.schema_.get("type") in ("string", "integer", "number")
            ):
                chance = EAGER_OPTIONAL
            if rng.random() >= chance:
                continue
        if from_walk and rng.random() < 0.9:
            index, values = from_walk[0] if rng.random() < 0.75 else rng.choice(from_walk)
            value = sample_value(p, graph.pools, rng, graph.now, walk_values=values)
            if _uses(value, values):
                sources[p.name] = index
        else:
            value = sample_value(p, graph.pools, rng, graph.now, walk=lookup if nested else None)
        if value is None:
            continue
        args[p.name] = value
    fix_time_pairs(args, rng)
    return args, sources


def _uses(value: Any, values: list[Any]) -> bool:
    if isinstance(value, list):
        return any(v in values for v in value)
    return value in values


async def execute_walk(
    env: Any,
    graph: ToolGraph,
    plan: list[str],
    rng: random.Random,
    difficulty: Difficulty,
    *,
    sandbox: Any = None,
    eager: Collection[str] = (),
) -> Walk:
    """Run the planned calls on a fresh instance; keep the ones that succeed.

    Reads named in `eager` (targeted tools) get their optional constraints filled more often.
    """
    from arena.tasks.replay import new_instance

    weak_share = difficulty.weak_edge_share / 4
    instance = new_instance(env, sandbox)
    steps: list[Step] = []
    try:
        for tool in plan:
            for _ in range(CALL_TRIES):
                args, sources = choose_args(
                    graph, tool, steps, rng, weak_share, eager=tool in eager and not graph.nodes[tool].writes
                )
                result = await instance.call(tool, args)
                if result.ok:
                    steps.append(
                        Step(
                            tool=tool,
                            arguments=args,
                            output=result.output,
                            writes=graph.nodes[tool].writes,
                            sources=sources,
                        )
                    )
                    break
        diff = instance.diff()
    finally:
        await instance.aclose()
    net = sum(sum(counts.values()) for counts in diff.counts().values())
    kinds: list[EdgeKind] = []
    for a, b in itertools.pairwise(steps):
        data = graph.graph.get_edge_data(a.tool, b.tool)
        kinds.append(data["kind"] if data else "independent")
    return Walk(steps=steps, edge_kinds=kinds, planned=plan, net_changed_rows=net)


def param_info(graph: ToolGraph, tool: str, param: str) -> ParamInfo | None:
    """The graph's record of one parameter (None for unknown names)."""
    node = graph.nodes.get(tool)
    return node.params.get(param) if node else None


def ungrounded_ids(walk: Walk, instruction: str) -> list[str]:
    """Identifier arguments an agent could not know: in neither the instruction nor an earlier result.

    A reference call that uses an id the user never gave and no earlier call returned teaches a
    policy trained on the reference to invent ids. Values are compared as text; nested arguments
    (an order's `items[].medication_id`) count too.
    """
    missing: list[str] = []
    seen: set[str] = set()
    for step in walk.steps:
        for name, value in iter_fields(step.arguments):
            text = str(value)
            if is_id_like(name) and text not in seen and text not in instruction:
                missing.append(f"{step.tool}.{name}={text}")
        seen.update(str(v) for _, v in iter_fields(step.output))
    return missing
