"""The tool dependency graph of one executable environment (Agent-World, EnvFactory).

Nodes are tools. An edge A -> B says what A's output does for B:
- strong (weight 3): an output field of A feeds a *required* input of B;
- weak (weight 2): it feeds only *optional* inputs of B (or ones the user could also give);
- independent (weight 1): nothing flows; B may still follow A in a task.
Each input parameter is labelled internal (some tool's output provides it) or external (only the
user can). Output fields are learned from real outputs: every tool is run on a scratch copy of the
seed database with values the database holds, which also fills the value pools that walks draw
arguments from. A helper model, when given, may add dependencies the names do not reveal.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any, Literal

import networkx as nx
import structlog
from pydantic import BaseModel, Field

from arena.protocols import ChatModel, ModelError
from arena.synth.cost import StageMeter, SynthesisReport
from arena.synth.values import ValuePools, coerce, generate, param_keys, resolve_schema
from arena.types import Message, SamplingParams

log = structlog.get_logger(__name__)

EdgeKind = Literal["strong", "weak", "independent"]
EDGE_WEIGHTS: dict[EdgeKind, int] = {"strong": 3, "weak": 2, "independent": 1}
_PROFILE_TRIES = 4


class ParamInfo(BaseModel):
    """One input parameter of a tool, resolved and labelled."""

    name: str
    required: bool
    schema_: dict[str, Any] = Field(alias="schema")
    description: str = ""
    source: Literal["internal", "external"] = "external"
    producers: list[str] = Field(default_factory=list)

    model_config = {"populate_by_name": True}


class ToolNode(BaseModel):
    """A tool as the graph sees it."""

    name: str
    writes: bool
    summary: str
    params: dict[str, ParamInfo]
    output_fields: list[str] = Field(default_factory=list)


class ToolGraph:
    """Nodes, typed weighted edges and the value pools of one environment version."""

    def __init__(self, env_name: str, version: str, nodes: dict[str, ToolNode], pools: ValuePools, now: str):
        self.env_name = env_name
        self.version = version
        self.nodes = nodes
        self.pools = pools
        self.now = now
        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(nodes)

    def add_edge(self, src: str, dst: str, kind: EdgeKind, params: list[str]) -> None:
        """Add (or upgrade to a stronger kind) the edge src -> dst."""
        old = self.graph.get_edge_data(src, dst)
        if old is not None and EDGE_WEIGHTS[old["kind"]] >= EDGE_WEIGHTS[kind]:
            return
        self.graph.add_edge(src, dst, kind=kind, weight=EDGE_WEIGHTS[kind], params=params)

    def edges_from(self, tool: str) -> list[tuple[str, EdgeKind, int]]:
        """(successor, kind, weight) for every edge leaving `tool`."""
        return [(dst, d["kind"], d["weight"]) for _, dst, d in self.graph.out_edges(tool, data=True)]

    def producers(self, tool: str, param: str) -> list[str]:
        """Tools whose output feeds `param` of `tool`."""
        return self.nodes[tool].params[param].producers

    def label_counts(self) -> dict[str, int]:
        """Edge counts per kind and parameter counts per source (for reports and `--json`)."""
        counts: dict[str, int] = {"strong": 0, "weak": 0, "independent": 0, "internal": 0, "external": 0}
        for _, _, d in self.graph.edges(data=True):
            counts[d["kind"]] += 1
        for node in self.nodes.values():
            for p in node.params.values():
                counts[p.source] += 1
        return counts


def _nodes(env: Any) -> dict[str, ToolNode]:
    nodes: dict[str, ToolNode] = {}
    for spec in env.tool_specs:
        schema = spec.parameters
        defs = schema.get("$defs", {})
        required = set(schema.get("required", []))
        params = {
            name: ParamInfo(
                name=name,
                required=name in required,
                schema=resolve_schema(raw, defs) | ({"$defs": defs} if defs else {}),
                description=str(raw.get("description", "")),
            )
            for name, raw in schema.get("properties", {}).items()
        }
        nodes[spec.name] = ToolNode(
            name=spec.name,
            writes=spec.name in env.write_tools,
            summary=spec.description.splitlines()[0] if spec.description else spec.name,
            params=params,
        )
    return nodes


def nested_names(schema: dict[str, Any]) -> list[str]:
    """Property names inside an object or array-of-objects parameter (`items[].item_id`)."""
    defs = schema.get("$defs", {})
    if schema.get("type") == "array":
        schema = resolve_schema(schema.get("items", {}), defs)
    if schema.get("type") == "object":
        return list(schema.get("properties", {}))
    return []


def sample_value(
    param: ParamInfo,
    pools: ValuePools,
    rng: random.Random,
    now: str,
    walk_values: list[Any] | None = None,
    walk: Callable[[str], list[Any]] | None = None,
) -> Any:
    """One value for `param`: an earlier walk output, an observed value, a database value, or generated.

    `walk_values` are earlier outputs for this parameter; `walk` looks them up for nested fields.
    """
    schema = param.schema_
    if walk_values is None and walk is not None:
        walk_values = walk(param.name) or None
    kind = schema.get("type")
    if kind == "array":
        item = resolve_schema(schema.get("items", {}), schema.get("$defs", {}))
        inner = param.model_copy(update={"schema_": item | {"$defs": schema.get("$defs", {})}})
        inner.name = param.name
        n = 1 if rng.random() < 0.7 else 2
        values = [sample_value(inner, pools, rng, now, walk_values, walk) for _ in range(n)]
        return list(dict.fromkeys(v for v in values if v is not None and not isinstance(v, dict))) or [
            v for v in values if v is not None
        ]
    if kind == "object" and "properties" in schema:
        defs = schema.get("$defs", {})
        out: dict[str, Any] = {}
        required = set(schema.get("required", []))
        for name, raw in schema["properties"].items():
            if name not in required and rng.random() < 0.5:
                continue
            sub = ParamInfo(
                name=name,
                required=name in required,
                schema=resolve_schema(raw, defs) | {"$defs": defs},
                description=str(raw.get("description", "")),
            )
            out[name] = sample_value(sub, pools, rng, now, None, walk)
        return out
    if "enum" in schema:
        return rng.choice(schema["enum"])
    tiers: list[list[Any]] = []
    if walk_values:
        tiers.append(walk_values)
    observed, database = pools.candidates(param.name)
    tiers.extend([observed, database])
    for tier in tiers:
        usable = [c for c in (coerce(v, schema) for v in tier) if c is not None]
        # Mostly the best tier, sometimes a lower one: variety without losing validity.
        if usable and rng.random() < 0.85:
            return rng.choice(usable)
    return generate(param.name, schema, param.description, rng, now)


def sample_args(node: ToolNode, pools: ValuePools, rng: random.Random, now: str) -> dict[str, Any]:
    """Arguments for profiling: every required parameter, no optional ones."""
    return {p.name: sample_value(p, pools, rng, now) for p in node.params.values() if p.required}


async def _profile(env: Any, nodes: dict[str, ToolNode], pools: ValuePools, sandbox: Any) -> None:
    """Run every tool on a scratch copy to learn its output fields (and the user's values)."""
    from arena.tasks.replay import new_instance

    rng = random.Random(0)
    instance = new_instance(env, sandbox)
    fields: dict[str, set[str]] = {name: set() for name in nodes}
    try:
        # Reads first, twice: ids found by the first pass feed tools that need them in the second.
        order = [n for n in nodes.values() if not n.writes] * 2 + [n for n in nodes.values() if n.writes]
        for node in order:
            for _ in range(_PROFILE_TRIES):
                result = await instance.call(node.name, sample_args(node, pools, rng, env.now))
                if result.ok:
                    fields[node.name].update(k for k, _ in _fields_of(result.output))
                    if not node.writes:
                        pools.observe(result.output)
                    break
    finally:
        await instance.aclose()
    for name, found in fields.items():
        nodes[name].output_fields = sorted(found)


def _fields_of(output: Any) -> list[tuple[str, Any]]:
    from arena.synth.values import iter_fields

    return list(iter_fields(output))


def _link(graph: ToolGraph) -> None:
    """Edges and parameter labels from output fields and parameter names."""
    nodes = graph.nodes
    for dst in nodes.values():
        for p in dst.params.values():
            keys = [k for name in [p.name, *nested_names(p.schema_)] for k in param_keys(name)]
            p.producers = [
                src.name
                for src in nodes.values()
                if src.name != dst.name and any(k in src.output_fields for k in keys)
            ]
            p.source = "internal" if p.producers else "external"
    for src in nodes.values():
        for dst in nodes.values():
            if src.name == dst.name:
                continue
            fed = [p for p in dst.params.values() if src.name in p.producers]
            if any(p.required for p in fed):
                graph.add_edge(src.name, dst.name, "strong", [p.name for p in fed])
            elif fed:
                graph.add_edge(src.name, dst.name, "weak", [p.name for p in fed])
            else:
                graph.add_edge(src.name, dst.name, "independent", [])


_CACHE: dict[tuple[str, str], ToolGraph] = {}


async def build_graph(
    env: Any, *, sandbox: Any = None, helper: ChatModel | None = None, meter: StageMeter | None = None
) -> ToolGraph:
    """The dependency graph of an executable environment (cached per folder and version without a helper)."""
    key = (str(env.path), env.version)
    if helper is None and key in _CACHE and set(_CACHE[key].nodes) == set(env.tool_names):
        return _CACHE[key]
    if env.kind != "executable" or env.template is None:
        raise ValueError(f"environment {env.name!r} is {env.kind}: graph synthesis needs an executable one")
    nodes = _nodes(env)
    pools = ValuePools()
    pools.load_database(env.template, env.user_id)
    await _profile(env, nodes, pools, sandbox)
    graph = ToolGraph(env.name, env.version, nodes, pools, env.now)
    _link(graph)
    if helper is not None:
        await refine_with_helper(graph, helper, meter=meter)
    else:
        _CACHE[key] = graph
    log.debug("tool_graph_built", env=env.name, **graph.label_counts())
    return graph


_REFINE_SCHEMA = {
    "type": "object",
    "properties": {
        "dependencies": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "from": {"type": "string"},
                    "to": {"type": "string"},
                    "param": {"type": "string"},
                },
                "required": ["from", "to", "param"],
            },
        }
    },
    "required": ["dependencies"],
}


async def refine_with_helper(graph: ToolGraph, helper: ChatModel, *, meter: StageMeter | None = None) -> int:
    """Ask the helper for data dependencies the names miss; returns how many valid ones were added.

    Only dependencies naming existing tools and an existing parameter of the target are kept;
    anything else in the answer is ignored (the graph from real outputs stands on its own).
    """
    lines = []
    for node in graph.nodes.values():
        params = ", ".join(f"{p.name}{'' if p.required else '?'}" for p in node.params.values())
        outs = ", ".join(node.output_fields[:20])
        lines.append(f"- {node.name}({params}) -> {{{outs}}}: {node.summary}")
    prompt = (
        "These are the tools of one application, with their inputs (? = optional) and output fields.\n"
        + "\n".join(lines)
        + '\n\nList data dependencies: when an output of tool "from" is needed as input "param" of tool "to".'
        ' Answer with JSON: {"dependencies": [{"from": ..., "to": ..., "param": ...}]}'
    )
    meter = meter or StageMeter(SynthesisReport(env=graph.env_name, kind="graph"))
    params = SamplingParams(max_tokens=384, temperature=0.0, json_schema=_REFINE_SCHEMA)
    try:
        completion = await meter.chat(helper, [Message(role="user", content=prompt)], params=params)
        data = json.loads(completion.text)
        deps = data["dependencies"] if isinstance(data, dict) else []
    except (ModelError, ValueError, KeyError, TypeError) as exc:
        log.info("graph_refine_rejected", env=graph.env_name, error=str(exc)[:200])
        return 0
    added = 0
    for dep in deps if isinstance(deps, list) else []:
        if not isinstance(dep, dict):
            continue
        src, dst, param = dep.get("from"), dep.get("to"), dep.get("param")
        if src not in graph.nodes or dst not in graph.nodes or src == dst:
            continue
        info = graph.nodes[dst].params.get(str(param))
        if info is None or src in info.producers:
            continue
        info.producers.append(str(src))
        info.source = "internal"
        graph.add_edge(str(src), str(dst), "strong" if info.required else "weak", [info.name])
        added += 1
    return added
