"""Sandboxed environments: tools of synthesized (model-written) folders run in `SandboxPool` workers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from arena.env.loader import load_environment
from arena.env.runtime import Environment
from arena.env.state import dump_state
from arena.env.unit_tests import run_tool_tests
from arena.sandbox import SandboxPool
from ops.cli import main

from .conftest import GOOD

CALLS = [
    ("place_order", {"product_id": "P-100", "quantity": 2}),
    ("get_order", {"order_id": "ORD-N0001"}),
    ("cancel_order", {"order_id": "ORD-1001"}),  # refused: shipped (rolled back in the worker)
    ("cancel_order", {"order_id": "ORD-1002", "reason": "mistake"}),
    ("place_order", {"product_id": "P-200"}),
    ("get_order", {"order_id": 5}),  # invalid arguments
]


def synthesized(folder: Path) -> Environment:
    with (folder / "env.toml").open("a") as f:
        f.write('origin = "synthesized"\n')
    return load_environment(folder)


def test_sandboxed_calls_match_in_process_calls(env_copy: Callable[[str], Path]) -> None:
    shop = load_environment(GOOD / "shop")
    local = shop.new_instance()
    expected = [local.call_sync(n, a).model_dump(exclude={"duration_us"}) for n, a in CALLS]
    env = synthesized(env_copy("good/shop"))

    async def run() -> None:
        async with SandboxPool(workers=1) as pool:
            await env.describe(pool)
            assert [s.model_dump() for s in env.tool_specs] == [s.model_dump() for s in shop.tool_specs]
            assert env.write_tools == shop.write_tools
            inst = env.new_instance(sandbox=pool)
            got = [(await inst.call(n, a)).model_dump(exclude={"duration_us"}) for n, a in CALLS]
            assert got == expected
            assert dump_state(inst.db.connection) == dump_state(local.db.connection)
            assert inst.diff() == local.diff()
            report = await run_tool_tests(env, sandbox=pool)
            assert report.ok and len(report.kept_tools) == 5
            await inst.aclose()

    anyio.run(run)


def test_check_runs_a_synthesized_environment_in_the_sandbox(
    env_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    folder = env_copy("good/gate")
    synthesized(folder)
    broken = env_copy("broken/everything").parent / "bad_hints"
    broken.mkdir()
    (broken / "tests.toml").write_text('[[case]]\ntool = "half"\nargs = { name = "a" }\n')
    for name in ("env.toml", "schema.sql", "seed.sql"):
        (broken / name).write_text((folder / name).read_text().replace('name = "gate"', 'name = "bad_hints"'))
    (broken / "tools.py").write_text(
        'from arena.env import Db, tool\n\n\n@tool\ndef half(db: Db, name) -> dict:\n    """Read."""\n    return {}\n'
    )
    assert main(["envs", "check", "--json", str(folder), str(broken)]) == 1
    report = {Path(r["path"]).name: r for r in json.loads(capsys.readouterr().out)["environments"]}
    gate = report["gate"]["gate"]
    assert report["gate"]["ok"] and gate["kept_tools"] == ["two_thirds"]
    assert gate["dropped_tools"] == ["half", "untested"]
    [problem] = report["bad_hints"]["problems"]
    assert "in the sandbox" in problem["message"] and "missing type hint" in problem["message"]
