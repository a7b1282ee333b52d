"""Import to training in one path, from real MCP servers.

A published server's parameters usually have no descriptions (its schemas come from typed
function signatures), which the quality filter would reject. The import writes them: the helper
model first, a deterministic fallback where the helper's text is unusable, each marked in
tools.json and in `arena envs show`. The written folder lands in `DATA_DIR/envs`, which the
daemon's environment loading reads, so the next round draws it with no other step.

The first test installs the official `mcp-server-git` from PyPI into a throwaway venv and imports
it with the real embedded model as the helper. `ScriptedFakeHelper` (fixed answers, not a
language model) drives the tests of the helper/fallback rules.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from arena.env.loader import load_environment
from arena.protocols import ModelError
from arena.store import Store, repo
from arena.types import Completion, Message, SamplingParams, ToolCall, ToolSpec
from ops.cli import main as cli_main
from ops.config import load_config
from ops.metrics import Metrics
from ops.phases.base import PhaseContext
from ops.phases.evaluate import EvaluatePhase, arena_draw
from ops.phases.runtime import load_envs
from simulate.importers import GENERATED_KEY, tools_from_json, tools_from_mcp, write_simulated_env
from simulate.param_descriptions import ANSWER_SCHEMA, fill_missing_descriptions, generated_marks

from ..scripted_chat import ScriptedChat

# Like mcp-server-git's tools: typed parameters with titles and no descriptions.
UNDESCRIBED = {
    "tools": [
        {
            "name": "git_log",
            "description": "Shows the commit logs of a repository",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "repo_path": {"title": "Repo Path", "type": "string"},
                    "max_count": {"default": 10, "title": "Max Count", "type": "integer"},
                    "author": {"type": "string", "description": "Only commits by this author"},
                },
                "required": ["repo_path"],
            },
            "annotations": {"readOnlyHint": True},
        },
        {
            "name": "git_tag",
            "description": "Creates a tag on a commit of the repository",
            "inputSchema": {
                "type": "object",
                "properties": {"repo_path": {"title": "Repo Path", "type": "string"}, "tag": {"type": "string"}},
                "required": ["repo_path", "tag"],
            },
        },
        {
            "name": "git_checkout",
            "description": "Switches branches",  # too short: dropped whatever its parameters get
            "inputSchema": {"type": "object", "properties": {"branch_name": {"type": "string"}}},
        },
        {
            "name": "git_blame",
            "description": "Shows who last changed each line of a file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "strng"}}},
        },
    ]
}  # fmt: skip


class ScriptedFakeHelper(ScriptedChat):
    """A `ChatModel` that answers from a script (not a language model); records each question."""

    name = "scripted-fake-helper"

    def __init__(self, answer: Callable[[str], str]) -> None:
        super().__init__()
        self.answer = answer

    @property
    def questions(self) -> list[str]:
        return [messages[-1].content for messages, _, _ in self.requests]

    @property
    def schemas(self) -> list[dict[str, Any] | None]:
        return [params.json_schema if params else None for _, _, params in self.requests]

    def reply(self, messages: list[Message], tools: Any, params: Any) -> str:
        return self.answer(messages[-1].content)


def _describe(question: str) -> str:
    """Fixed descriptions by the parameter the question is about."""
    texts = {
        "repo_path": "The folder of the git repository to read.",
        "max_count": "How many commits to list at most.",
        "tag": "The name of the new tag.",
    }
    name = question.split("Parameter: ", 1)[1].split(" ", 1)[0]
    return json.dumps({"description": texts[name]})


def _written(folder: Path) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in json.loads((folder / "tools.json").read_text())["tools"]}


def _git_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    (root / "README.md").write_text("hello\n")
    for cmd in (["init", "-q"], ["add", "README.md"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", *cmd], cwd=root, env=env, check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def mcp_server_git(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`mcp-server-git` from PyPI, installed into a venv of its own; its entry point."""
    venv = tmp_path_factory.mktemp("git-server") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "mcp-server-git"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"pip install mcp-server-git failed:\n{done.stderr[-2000:]}"
    return venv / "bin" / "mcp-server-git"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh daemon data dir (ARENA_DATA_DIR), no config file, no extra env path."""
    for var in ("ARENA_CONFIG", "ARENA_ENV_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _context() -> PhaseContext:
    """A PhaseContext of round 2 on the configuration the environment gives (no store needed)."""

    async def safe_point() -> None:
        return None

    return PhaseContext(
        round=2,
        phase="evaluate",
        config=load_config(),
        store=None,  # type: ignore[arg-type]
        metrics=Metrics(),
        models=None,  # type: ignore[arg-type]
        _safe_point=safe_point,
        _progress=lambda done, total, note: None,
    )


@dataclass
class GitImport:
    """What `arena envs import-mcp -- mcp-server-git` wrote into a fresh data dir."""

    data_dir: Path
    listed: int  # tools the server lists
    undescribed: set[tuple[str, str]]  # (tool, parameter) pairs the server gives no description
    report: dict[str, Any]  # the command's --json report


@pytest.fixture(scope="module")
def git_import(
    mcp_server_git: Path, embedded_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> GitImport:
    """The official `mcp-server-git` imported as a new user would, with the embedded model as helper.

    Its category is Work, beside the bundled job_search: a category of one environment is never
    held out (nothing else in it could be trained on); of two, the seeded draw holds out one.
    """
    root = tmp_path_factory.mktemp("git-import")
    repo = _git_repo(root / "repo")
    server = [str(mcp_server_git), "--repository", str(repo)]
    listed = anyio.run(lambda: tools_from_mcp(server[0], server[1:]))
    undescribed = {
        (t.name, p)
        for t in listed.tools
        for p, prop in (t.input_schema or {}).get("properties", {}).items()
        if not prop.get("description")
    }
    argv = ["envs", "import-mcp", "--json", "--helper", str(embedded_model_path)]
    argv += ["--category", "Work/Developer tools", "--", *server]
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(out):
        for var in ("ARENA_CONFIG", "ARENA_ENV_PATH"):
            env.delenv(var, raising=False)
        env.setenv("ARENA_DATA_DIR", str(root / "data"))
        code = cli_main(argv)
    text = out.getvalue()
    assert code == 0, text[-2000:]
    report = json.loads(text[text.index("{") :])  # after any log line printed before the CLI routed them
    return GitImport(root / "data", len(listed.tools), undescribed, report)


def test_mcp_server_git_is_imported_with_its_parameters_described(
    git_import: GitImport, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert git_import.listed == 12
    assert len(git_import.undescribed) >= 12  # the reason such a server was rejected whole before
    report = git_import.report
    folder = Path(report["path"])
    assert folder.parent == git_import.data_dir.absolute() / "envs" and report["daemon_loads"] is True
    assert len(report["kept"]) >= 10, report["dropped"]
    for dropped in report["dropped"]:  # only tools that stay unusable, each with its reason
        assert dropped["reasons"] and not any("parameter" in r for r in dropped["reasons"]), dropped

    written = _written(folder)
    assert sorted(written) == sorted(report["kept"])
    marked: set[tuple[str, str]] = set()
    for name, tool in written.items():
        props = tool["inputSchema"]["properties"]
        for pname, prop in props.items():
            assert len(prop.get("description", "").strip()) >= 3, (name, pname)
        for mark in tool.get(GENERATED_KEY, []):
            assert mark["by"] in {"helper", "fallback"}
            text = props[mark["parameter"]]["description"]
            assert text.isascii() and len(text) <= 120, text
            marked.add((name, mark["parameter"]))
    assert marked == {(t, p) for t, p in git_import.undescribed if t in written}
    by = [g["by"] for g in report["generated"]]
    assert "helper" in by, report["generated"]  # the real model wrote some of them

    env = load_environment(folder, cache=False)
    assert env.kind == "simulated" and len(env.tool_specs) == len(report["kept"])
    assert generated_marks(folder) == {
        t: {m["parameter"]: m["by"] for m in tool[GENERATED_KEY]}
        for t, tool in written.items()
        if GENERATED_KEY in tool
    }
    assert cli_main(["envs", "show", report["env"], "--env-path", str(folder.parent)]) == 0
    shown = capsys.readouterr().out
    assert len(re.findall(r"\[generated: (?:helper|fallback)\]$", shown, re.MULTILINE)) == len(marked)
    monkeypatch.setenv("ARENA_DATA_DIR", str(git_import.data_dir))
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    assert report["env"] in load_envs(_context())


SIM_RESULT = {"branch": "main", "working_tree": "scripted-clean"}


class ScriptedFakeSimHelper(ScriptedChat):
    """The helper as a scripted fake (not a language model), for every role a simulated round needs.

    Task generator: a fixed task on the first tool it may name. Tool simulator: `SIM_RESULT`.
    Judge: passes every criterion when `SIM_RESULT` reached the transcript, none otherwise.
    """

    name = "scripted-fake-sim-helper"

    def __init__(self) -> None:
        super().__init__()
        self.roles: list[str] = []

    def reply(self, messages: list[Message], tools: Any, params: SamplingParams | None) -> str:
        prompt = messages[-1].content
        fields = ((params.json_schema if params else None) or {}).get("properties", {})
        if "expected_tools" in fields:
            self.roles.append("taskgen")
            task = {
                "intent": "Know which branch the repository is on and whether it is clean",
                "expected_tools": fields["expected_tools"]["items"]["enum"][:1],
                "first_message": "Which branch am I on, and do I have uncommitted changes?",
                "persona": "developer",
                "criteria": ["The assistant looked the repository's status up", "It names the branch"],
            }
            return json.dumps(task)
        if "tool_reward" in fields:
            self.roles.append("tool")
            return json.dumps({"status": "ok", "result": SIM_RESULT, "error": "", "tool_reward": 1})
        self.roles.append("judge")
        met = SIM_RESULT["working_tree"] in prompt
        n = sum(1 for line in prompt.split("Criteria:\n", 1)[1].splitlines() if line[:1].isdigit())
        verdicts = [{"criterion": i, "reason": "scripted", "passed": met} for i in range(1, n + 1)]
        return json.dumps({"verdicts": verdicts})


class ScriptedFakeToolPolicy(ScriptedChat):
    """A scripted fake policy (not a language model): calls the first tool it is shown once, with a
    placeholder for each required argument, then answers with what the tool returned."""

    name = "scripted-fake-tool-policy"

    def reply(self, messages: list[Message], tools: list[ToolSpec] | None, params: Any) -> Completion | str:
        results = [m.content for m in messages if m.role == "tool"]
        if results or not tools:
            return f"Here is what I found: {results[-1] if results else 'nothing'}"
        schema = tools[0].parameters
        placeholder = {"string": "/srv/repo", "integer": 1, "number": 1, "boolean": True}
        required = schema.get("required", [])
        args = {p: placeholder.get(schema["properties"][p].get("type"), "x") for p in required}
        return Completion(tool_calls=[ToolCall(id="call-1", name=tools[0].name, arguments=args)])


@pytest.mark.anyio
async def test_the_next_round_evaluates_the_imported_server(
    git_import: GitImport, phase_context: Callable[..., PhaseContext]
) -> None:
    settings = {
        "ARENA_DATA_DIR": str(git_import.data_dir),
        "ARENA_ROUND__EVAL_TASKS_PER_ENV": "1",
        "ARENA_ROUND__YARDSTICK_TASKS_PER_LEVEL": "0",
        "ARENA_ROUND__MAX_TURNS": "3",
    }
    name = git_import.report["env"]

    def draw(seed: int) -> Any:
        config = load_config(environ={**settings, "ARENA_DAEMON__SEED": str(seed)})
        envs = load_envs(phase_context(config))
        return config, arena_draw(phase_context(config), {n: e.category[0] for n, e in envs.items()})

    # A seed whose draw holds it out (the draw holds out one of Work's two: the import or job_search).
    config = next(c for c, d in map(draw, range(50)) if name in d.arena)
    round_no = 1
    helper = ScriptedFakeSimHelper()
    async with Store(config.database_url) as store:
        await store.migrate()
        ctx = phase_context(
            config, store, round_no, phase="evaluate", policy=ScriptedFakeToolPolicy(), helper=helper
        )
        out = await EvaluatePhase().run(ctx)
        async with store.transaction() as s:
            episodes = [
                e for e in await repo.episodes_for_round(s, round_no, purpose="eval") if e.env == name
            ]

    assert name in out["evaluated"] and name in out["judge"]["envs"]
    assert len(episodes) == 1 and out["pass_rates"][name] == 1.0
    messages = episodes[0].transcript["messages"]
    tool_lines = [m["content"] for m in messages if m["role"] == "tool"]
    # The helper played the imported tool, and the judge scored the episode on that result.
    assert len(tool_lines) == 1 and SIM_RESULT["working_tree"] in tool_lines[0]
    assert episodes[0].verdict["passed"] is True
    assert {"taskgen", "tool", "judge"} <= set(helper.roles)


def test_missing_descriptions_come_from_the_helper(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tools_from_json(UNDESCRIBED)
    helper = ScriptedFakeHelper(_describe)
    written = anyio.run(lambda: fill_missing_descriptions(tools, helper))
    # repo_path is asked about once (same name and schema in two tools); git_blame (invalid schema)
    # and git_checkout (too short a description) are not asked about at all.
    assert len(helper.questions) == 3 and all(s == ANSWER_SCHEMA for s in helper.schemas)
    first = next(q for q in helper.questions if "Parameter: repo_path" in q)
    assert "git_log" in first and "Shows the commit logs" in first and '"title": "Repo Path"' in first
    assert {(g.tool, g.parameter, g.by) for g in written} == {
        ("git_log", "repo_path", "helper"),
        ("git_log", "max_count", "helper"),
        ("git_tag", "repo_path", "helper"),
        ("git_tag", "tag", "helper"),
        ("git_checkout", "branch_name", "fallback"),
    }

    report = write_simulated_env(
        tools, tmp_path / "git", name="git", title="Git", category=["Dev", "Git"],
        description="Git tools.", source="test",
    )  # fmt: skip
    assert report.kept == ["git_log", "git_tag"]
    reasons = {d.name: d.reasons for d in report.dropped}
    assert reasons["git_blame"][0].startswith("invalid JSON schema")
    assert len(reasons["git_checkout"]) == 1 and "too short" in reasons["git_checkout"][0]

    tools_json = _written(tmp_path / "git")
    log_props = tools_json["git_log"]["inputSchema"]["properties"]
    assert log_props["repo_path"]["description"] == "The folder of the git repository to read."
    assert log_props["author"]["description"] == "Only commits by this author"  # the source's own
    assert tools_json["git_log"][GENERATED_KEY] == [
        {"parameter": "repo_path", "by": "helper", "model": "scripted-fake-helper"},
        {"parameter": "max_count", "by": "helper", "model": "scripted-fake-helper"},
    ]
    # The mark survives a reload, and `arena envs show` shows it on the generated lines only.
    assert load_environment(tmp_path / "git", cache=False).tool_names == ["git_log", "git_tag"]
    assert generated_marks(tmp_path / "git")["git_tag"] == {"repo_path": "helper", "tag": "helper"}
    assert cli_main(["envs", "show", str(tmp_path / "git")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("max_count" in x and x.endswith("[generated: helper]") for x in lines)
    assert any("author" in x and "generated" not in x for x in lines)
    assert cli_main(["envs", "show", str(tmp_path / "git"), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["tools"][0]["generated"] == {"repo_path": "helper", "max_count": "helper"}


@pytest.mark.parametrize(
    "answer",
    [
        lambda q: "Sure! The repo path is where the repository is.",  # not JSON
        lambda q: json.dumps({"description": ""}),
        lambda q: json.dumps({"description": "string"}),
        lambda q: json.dumps({"text": "The folder of the git repository to read."}),
        lambda q: json.dumps({"description": "The status of the repository is"}),  # cut off
        lambda q: json.dumps({"description": "The " + "path path " * 5}),
    ],
    ids=["not-json", "empty", "one-word", "wrong-key", "unfinished", "repeated"],
)
def test_an_unusable_answer_falls_back_to_name_and_schema(answer: Callable[[str], str]) -> None:
    tools = tools_from_json(UNDESCRIBED)
    written = anyio.run(lambda: fill_missing_descriptions(tools, ScriptedFakeHelper(answer)))
    texts = {(g.tool, g.parameter): g for g in written}
    repo = texts[("git_log", "repo_path")]
    assert repo.by == "fallback" and repo.text == "repo_path (string): the repo path" and repo.why
    assert texts[("git_log", "max_count")].text == "max_count (integer, optional): the max count; default 10"
    assert texts[("git_tag", "tag")].text == "tag (string): the tag"
    assert tools[0].input_schema["properties"]["repo_path"]["description"] == repo.text


def test_a_failing_helper_or_none_falls_back(tmp_path: Path) -> None:
    def fail(question: str) -> str:
        raise ModelError("the helper is down")

    tools = tools_from_json(UNDESCRIBED)
    written = anyio.run(lambda: fill_missing_descriptions(tools, ScriptedFakeHelper(fail)))
    assert {g.by for g in written} == {"fallback"}
    assert "the helper is down" in written[0].why
    tools = tools_from_json(UNDESCRIBED)
    written = anyio.run(lambda: fill_missing_descriptions(tools, None))
    assert {g.by for g in written} == {"fallback"} and written[0].why == "no helper model"
    report = write_simulated_env(
        tools, tmp_path / "git", name="git", title="Git", category=["Dev", "Git"],
        description="Git tools.", source="test",
    )  # fmt: skip
    assert report.kept == ["git_log", "git_tag"]


def test_an_import_joins_the_next_rounds_pools(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "git_tools.json"
    src.write_text(json.dumps(UNDESCRIBED))
    argv = ["envs", "import-tools", str(src), "--helper", "none", "--category", "Developer/Git"]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    folder = data_dir.absolute() / "envs" / "git_tools"
    assert f"to {folder}: 2 tools kept" in out and "the next round draws it" in out
    assert "git_log.repo_path [fallback]: repo_path (string): the repo path" in out

    # The CLI finds it where the daemon does, with no --env-path.
    assert cli_main(["envs", "show", "git_tools"]) == 0
    shown = capsys.readouterr().out
    assert "git_log" in shown and "[generated: fallback]" in shown
    assert cli_main(["envs", "list", "--json"]) == 0
    listed = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert listed["git_tools"]["path"] == str(folder)

    # What the daemon's phases load at the start of the next round, and how EVALUATE draws it.
    ctx = _context()
    envs = load_envs(ctx)
    assert envs["git_tools"].kind == "simulated" and envs["git_tools"].path == folder
    draw = arena_draw(ctx, {name: env.category[0] for name, env in envs.items()})
    assert "git_tools" in {*draw.arena, *draw.training}
    # The next phase gets the same environment (loaded, and described, once per content version);
    # an edit to the folder is a new version.
    assert load_envs(ctx)["git_tools"] is envs["git_tools"]
    toml = folder / "env.toml"
    toml.write_text(toml.read_text() + "# edited by hand\n")
    assert load_envs(ctx)["git_tools"] is not envs["git_tools"]

    # Importing again does not overwrite it: a clear error before any helper is loaded.
    assert cli_main(argv) == 2
    assert "already exists" in capsys.readouterr().err
    # An --out elsewhere is written, and the report says the daemon does not load it.
    assert cli_main([*argv, "--out", str(tmp_path / "elsewhere" / "git2"), "--name", "git2"]) == 0
    assert "the daemon does not load this folder" in capsys.readouterr().out
    assert "git2" not in load_envs(_context())
