"""Environment synthesis from a theme: the pipeline, its validators and self-correction."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from arena.env.loader import load_environment
from arena.sandbox import SandboxPool
from arena.synth.envgen import synthesize_environment
from arena.synth.graph_tasks import synthesize_graph_tasks
from arena.synth.source_checks import check_tools_source
from arena.tasks.gates import run_gates
from arena.types import Message
from ops.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "tool_library"
FILES = {
    "description": "description.json",
    "schema": "schema.sql",
    "seed": "seed.sql",
    "tool_specs": "tool_specs.json",
    "tools": "tools.py",
    "tests": "tests.toml",
}


def capable_helper_script(broken_first: set[str]):
    """Replies of the quality a capable model gives, by step; `broken_first` steps start with a mistake."""
    seen: dict[str, int] = {}

    def reply(messages: list[Message]) -> str:
        step = messages[0].content.split("\n", 1)[0].removeprefix("Step: ").strip()
        seen[step] = seen.get(step, 0) + 1
        body = (FIXTURE / FILES[step]).read_text()
        if step in broken_first and seen[step] == 1:
            return {
                "schema": body.replace("CREATE TABLE loans", "CREATE TABLE loans oops"),
                "tools": "import os\n" + body,
                "tests": body.replace("expect = { count = 2 }", "expect = { count = 7 }")
                .replace('expect_error = "lent out"', 'expect = { status = "active" }')
                .replace(
                    'args = { loan_id = "LN-2" }\nexpect_error = true',
                    'args = { loan_id = "LN-2" }\nexpect = { status = "x" }',
                ),
            }[step]
        return f"```\n{body}```" if step in ("schema", "tools") else body

    return reply


@pytest.mark.anyio
async def test_scripted_theme_becomes_a_checked_environment_with_gated_tasks(
    tmp_path: Path, scripted_helper
) -> None:
    helper = scripted_helper(capable_helper_script({"schema", "tools", "tests"}))
    out = tmp_path / "tool_library"
    async with SandboxPool() as pool:
        seen = []
        result = await synthesize_environment(
            "a neighbourhood tool library", out, helper=helper, sandbox=pool, on_report=seen.append
        )
        assert result.ok, result.problem
        assert seen == [result.report] and result.report.kept == 1
        left = sorted([p.name async for p in anyio.Path(tmp_path).iterdir()])
        assert left == ["tool_library"]  # nothing staged is left behind
        tries = {s.step: s.tries for s in result.steps}
        assert tries == {"description": 1, "schema": 2, "seed": 1, "tool_specs": 1, "tools": 2, "tests": 2}
        assert any("not right" in p for p in helper.prompts)  # the error summary was fed back
        env = load_environment(out, cache=False)
        assert env.origin == "synthesized" and env.sandboxed
        await env.describe(pool)
        res = await synthesize_graph_tasks(env, 3, seed=0, sandbox=pool)
        assert res.tasks, res.report.rejections
        for task in res.tasks:
            report = await run_gates(env, task, sandbox=pool)
            assert report.ok, (report.gold.detail, report.empty.detail)
    assert result.report.model_calls == 9
    # The CLI starts its own event loop: run it off this one.
    assert await anyio.to_thread.run_sync(main, ["envs", "check", str(out)]) == 0


def test_static_checks_name_the_problem() -> None:
    src = (FIXTURE / "tools.py").read_text()
    assert check_tools_source(src) == []
    bad = (
        "import os\nimport datetime\n" + src.replace("db.now()", "datetime.datetime.now()") + "\nopen('x')\n"
    )
    problems = " | ".join(check_tools_source(bad))
    assert "import os is not allowed" in problems and "import datetime is not allowed" in problems
    assert "db.now()" in problems and "open() is not allowed" in problems
    assert "syntax error" in check_tools_source("def broken(:\n")[0]


@pytest.mark.anyio
async def test_step_that_never_validates_keeps_nothing(tmp_path: Path, scripted_helper) -> None:
    helper = scripted_helper(['{"name": "Bad Name!"}'])
    out = tmp_path / "never"
    async with SandboxPool() as pool:
        result = await synthesize_environment("anything", out, helper=helper, sandbox=pool, max_tries=2)
    assert not result.ok and "description" in (result.problem or "") and not out.exists()
    assert result.report.rejections == {"envgen": 1} and len(helper.prompts) == 2


@pytest.mark.model
def test_cli_with_the_embedded_model_rejects_cleanly(tmp_path: Path, capsys) -> None:
    out = tmp_path / "gen"
    code = main(
        [
            "envs",
            "synthesize",
            "a tiny bakery",
            "--out",
            str(out),
            "--max-tries",
            "1",
            "--max-tokens",
            "48",
            "--json",
        ]
    )
    record = json.loads(capsys.readouterr().out)
    # The tiny model does not produce a working environment; whatever happens, nothing broken is kept.
    if code != 0:
        assert not record["ok"] and record["problem"] and not out.exists()
    else:
        assert main(["envs", "check", str(out)]) == 0
