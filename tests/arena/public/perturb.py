"""Perturbed ground-truth trajectories of BFCL entries, for the parity test (deterministic per entry).

Each kind is one mistake a policy makes: a call dropped, an argument changed, an extra call, a call
moved to the next turn, a call in a turn that expects none. Trajectories are in BFCL's decoded
form (per turn, per step, call strings), one step per turn.
"""

from __future__ import annotations

import ast
import random
from typing import Any

KINDS = ("gold", "drop", "arg", "extra", "move", "irrelevance")
Decoded = list[list[list[str]]]


def _decoded(turns: list[list[str]]) -> Decoded:
    return [[list(calls)] if calls else [] for calls in turns]


def _changed(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, 7, -1])
    if isinstance(value, float):
        return round(value * 1.5 + 1.0, 2)
    if isinstance(value, str):
        return value + "_x" if value else "x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "x": 1}
    return "x"


def change_argument(call: str, rng: random.Random) -> str | None:
    """`call` with one argument's value changed; None when it has no argument."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call)
    slots = [("arg", i) for i in range(len(node.args))] + [("kw", i) for i in range(len(node.keywords))]
    if not slots:
        return None
    kind, i = rng.choice(slots)
    target = node.args[i] if kind == "arg" else node.keywords[i].value
    new = ast.parse(repr(_changed(ast.literal_eval(target), rng)), mode="eval").body
    if kind == "arg":
        node.args[i] = new
    else:
        node.keywords[i].value = new
    return ast.unparse(node)


def perturb(entry_id: str, truth: list[list[str]], kind: str) -> Decoded | None:
    """The ground truth with one mistake of `kind`, or None when the entry has no place for it."""
    rng = random.Random(f"{entry_id}:{kind}")
    turns = [list(t) for t in truth]
    full = [t for t, calls in enumerate(turns) if calls]
    if kind == "gold":
        return _decoded(turns)
    if kind == "drop":
        t = rng.choice(full)
        del turns[t][rng.randrange(len(turns[t]))]
    elif kind == "arg":
        options = [(t, i) for t in full for i, c in enumerate(turns[t]) if "=" in c or "()" not in c]
        rng.shuffle(options)
        for t, i in options:
            changed = change_argument(turns[t][i], rng)
            if changed is not None:
                turns[t][i] = changed
                break
        else:
            return None
    elif kind == "extra":
        t = rng.choice(full)
        i = rng.randrange(len(turns[t]))
        turns[t].insert(i + 1, turns[t][i])
    elif kind == "move":
        movable = [t for t in full if t + 1 < len(turns)]
        if not movable:
            return None
        t = rng.choice(movable)
        turns[t + 1].insert(0, turns[t].pop())
    elif kind == "irrelevance":
        empty = [t for t, calls in enumerate(turns) if not calls]
        if not empty:
            return None
        t = rng.choice(empty)
        later = [c for u in range(t + 1, len(turns)) for c in turns[u]]
        turns[t].append(later[0] if later else rng.choice([c for u in full for c in turns[u]]))
    else:
        raise ValueError(kind)
    return _decoded(turns)
