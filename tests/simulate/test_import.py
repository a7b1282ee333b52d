"""Importers: JSON tool lists and a live MCP server become simulated environments that run.

The MCP import starts the real `arena mcp food_delivery` server over stdio through the real `mcp`
client. Running the imported environment uses `ScriptedFakeChatModel` (prepared answers, not a
language model) for the policy and the helper, since only the control flow is under test here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from arena.env.loader import load_environment
from arena.tasks.judge import JUDGE_SYSTEM
from arena.tasks.model import RubricCheck, Task
from arena.types import Completion, Message, SamplingParams, ToolSpec
from ops.cli import main as cli_main
from simulate.importers import ToolImportError, tools_from_json, write_simulated_env
from simulate.simenv import run_simulated_episode
from simulate.simulators.tool import TOOL_SYSTEM

ARENA = str(Path(sys.executable).parent / "arena")

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_stock_price",
            "description": "Latest traded price of a stock by its ticker symbol.",
            "parameters": {
                "type": "object",
                "properties": {"ticker": {"type": "string", "description": "Ticker symbol, e.g. AAPL"}},
                "required": ["ticker"],
            },
        },
    },
    {"type": "function", "function": {"name": "foo", "description": "Does a thing for the user somehow.", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "convert_currency", "description": "Convert", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "bad schema", "description": "Has a name with a space in it.", "parameters": {}}},
    {
        "name": "list_exchanges",
        "description": "Stock exchanges the service covers, with their trading hours.",
        "parameters": {"type": "object", "properties": {"region": {"type": "strng", "description": "Region"}}},
    },
]  # fmt: skip


class ScriptedFakeChatModel:
    """A fake ChatModel (not a language model): answers chosen by a function of the request."""

    name = "scripted-fake"

    def __init__(self, answer) -> None:
        self.answer = answer

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        return Completion(text=self.answer(messages), model=self.name)


def test_openai_function_list_is_filtered_with_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "finance_tools.json"
    src.write_text(json.dumps(OPENAI_TOOLS))
    out = tmp_path / "envs" / "finance"
    assert (
        cli_main(
            ["envs", "import-tools", str(src), "--out", str(out), "--json", "--category", "Finance/Quotes"]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["kept"] == ["get_stock_price"] and report["env"] == "finance_tools"
    reasons = {d["name"]: d["reasons"] for d in report["dropped"]}
    assert reasons["foo"] == ["name 'foo' is a generic placeholder"]
    assert "too short" in reasons["convert_currency"][0]
    assert reasons["bad schema"][0].startswith("name must match")
    assert reasons["list_exchanges"][0].startswith("invalid JSON schema")
    env = load_environment(out)
    assert env.kind == "simulated" and env.category == ["Finance", "Quotes"]
    assert [s.name for s in env.tool_specs] == ["get_stock_price"]


def test_mcp_tools_list_json_keeps_read_only_hints(tmp_path: Path) -> None:
    data = {
        "tools": [
            {
                "name": "search_books",
                "description": "Search the library catalogue by title or author.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "Title or author words"}},
                    "required": ["query"],
                },
                "annotations": {"readOnlyHint": True},
            },
            {
                "name": "reserve_book",
                "description": "Place a hold on a book for the signed-in member.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"book_id": {"type": "string", "description": "Catalogue id"}},
                    "required": ["book_id"],
                },
            },
        ]
    }
    tools = tools_from_json(data)
    report = write_simulated_env(
        tools, tmp_path / "lib", name="lib", title="Library", category=["Education", "Library"],
        description="A library.", source="test",
    )  # fmt: skip
    env = load_environment(Path(report.path))
    assert env.write_tools == ["reserve_book"] and not report.dropped


def test_bad_inputs_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"tools": [')
    assert cli_main(["envs", "import-tools", str(bad)]) == 2
    assert "invalid JSON at line 1" in capsys.readouterr().err
    bad.write_text('{"nothing": 1}')
    assert cli_main(["envs", "import-tools", str(bad)]) == 2
    assert "expected an MCP tools/list result" in capsys.readouterr().err
    assert cli_main(["envs", "import-tools", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad.write_text(json.dumps([OPENAI_TOOLS[1]]))
    assert cli_main(["envs", "import-tools", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert (
        "no tool passed the quality filter (foo: name 'foo' is a generic placeholder)"
        in capsys.readouterr().err
    )
    assert cli_main(["envs", "import-mcp"]) == 2
    assert "give the MCP server command after --" in capsys.readouterr().err
    assert cli_main(["envs", "import-mcp", "--", str(tmp_path / "no-such-server")]) == 2
    assert "cannot start the MCP server" in capsys.readouterr().err
    with pytest.raises(ToolImportError, match="empty"):
        tools_from_json([])


def test_import_mcp_from_arena_mcp_food_delivery_loads_and_runs(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "food_sim"
    # capfd, not capsys: the MCP client hands the server process our real stderr file descriptor.
    assert cli_main(["envs", "import-mcp", "--out", str(out), "--", ARENA, "mcp", "food_delivery"]) == 0
    printed = capfd.readouterr().out
    assert "wrote simulated environment 'food_delivery_sim'" in printed
    env = load_environment(out)
    assert env.kind == "simulated" and len(env.tool_specs) >= 10
    assert "place_order" in env.write_tools and "search_restaurants" not in env.write_tools
    assert (tmp_path / "food_sim" / "env.toml").read_text().count("mcp: ") == 1

    def helper(messages: list[Message]) -> str:
        if messages[0].content == TOOL_SYSTEM:
            return json.dumps({"status": "ok", "result": {"restaurants": 3}, "error": "", "tool_reward": 1})
        assert messages[0].content == JUDGE_SYSTEM
        return json.dumps({"verdicts": [{"criterion": 1, "reason": "listed", "passed": True}]})

    turns = iter(
        ['<tool_call>{"name": "search_restaurants", "arguments": {}}</tool_call>', "There are 3 restaurants."]
    )
    task = Task(
        id="find-food", env=env.name, instruction="What restaurants can deliver?",
        checks=[RubricCheck(criteria=["Restaurants were listed"])], origin="simulated",
    )  # fmt: skip
    result = anyio.run(
        lambda: run_simulated_episode(
            ScriptedFakeChatModel(lambda _m: next(turns)), env, task, helper=ScriptedFakeChatModel(helper)
        )
    )
    assert result.transcript.finish == "answered" and result.transcript.calls[0].result.ok
    assert result.verdict.passed and result.verdict.reward == pytest.approx(1.0)
