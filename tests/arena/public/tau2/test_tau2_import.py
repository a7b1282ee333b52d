"""`arena envs import-tau2`: a tau2-bench checkout's domain becomes `DATA_DIR/public/tau2/<domain>`
(tasks, policy, db, the agent's tool schemas read with `ast`, the checkout's commit), and a failed
import leaves the previous one as it was."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, create_model

from arena.public.tau2.importer import CheckoutError, checkout_commit, import_tau2
from arena.public.tau2.model import Tau2Task, load_domain, load_domain_folder
from arena.public.tau2.tool_docs import parse_docstring, tool_specs
from ops.cli import main

MINI = Path(__file__).resolve().parent / "mini"

DOMAIN = Path("data/tau2/domains/retail")
CODE = MINI / "src/tau2/domains/retail"
SHA = "0123456789abcdef0123456789abcdef01234567"


def test_the_mini_checkout_imports_with_its_commit_splits_and_tools(
    mini_checkout: Path, tmp_path: Path
) -> None:
    git = mini_checkout / ".git"
    (git / "refs/heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs/heads/main").write_text(SHA + "\n")
    manifest = import_tau2(mini_checkout, "retail", tmp_path / "out" / "retail")
    assert manifest.commit == SHA and manifest.source == str(mini_checkout) and manifest.tasks == 9
    assert manifest.splits == json.loads((MINI / DOMAIN / "split_tasks.json").read_text())
    domain = load_domain_folder(tmp_path / "out" / "retail")
    assert domain.manifest == manifest and domain.name == "retail"
    assert [t.id for t in domain.tasks] == [str(i) for i in range(9)]
    assert [t.id for t in domain.split("train")] == ["0", "1", "2", "3"]
    assert (domain.folder / "db.json").read_bytes() == (MINI / DOMAIN / "db.json").read_bytes()
    assert domain.policy == (MINI / DOMAIN / "policy.md").read_text()
    specs, _ = tool_specs((CODE / "tools.py").read_text(), (CODE / "data_model.py").read_text())
    assert domain.tool_specs == specs and manifest.tools == [s.name for s in specs]
    assert "_order" not in manifest.tools  # a method without @is_tool is no tool

    raw = {t["id"]: t for t in json.loads((MINI / DOMAIN / "tasks.json").read_text())}
    for task in domain.tasks:  # what the checkout says, kept (τ²'s bookkeeping fields dropped)
        row = raw[task.id]
        criteria = row["evaluation_criteria"] or {}
        assert task.evaluation_criteria.reward_basis == criteria.get("reward_basis", ["DB", "COMMUNICATE"])
        assert [a.model_dump(exclude_defaults=True) for a in task.evaluation_criteria.actions] == [
            {k: v for k, v in a.items() if v is not None} for a in criteria.get("actions") or []
        ]
    assert domain.task("6").initial_state.initialization_actions[0]["func_name"] == "modify_user_address"
    assert "annotations" not in domain.task("1").model_dump()
    no_criteria = domain.task("8").evaluation_criteria  # τ² scores such a task 1: these defaults do too
    assert no_criteria.reward_basis == ["DB", "COMMUNICATE"] and not no_criteria.db_reference
    assert domain.task("0").evaluation_criteria.db_reference
    with pytest.raises(KeyError, match="no τ² retail task '99'"):
        domain.task("99")


def test_the_user_simulator_reads_the_scenario_as_tau2_renders_it(mini_domain: Any) -> None:
    assert mini_domain.task("8").user_instructions() == (
        "Persona:\n\tYou are curt and type in lower case.\n"
        "Instructions:\n\task what the shop sells, then say goodbye."
    )
    assert mini_domain.task("2").user_instructions() == (
        "Instructions:\n"
        "\tDomain: retail\n"
        "\tReason for call:\n\t\tYou want to cancel order #W1000002.\n"
        "\tKnown info:\n\t\tYou are Ada Park, email ada.park@example.com.\n"
        "\tUnknown info:\n\t\tYou do not know the order was delivered.\n"
        "\tTask instructions:\n\t\tYou are polite and answer the agent's questions."
    )


def test_the_commit_is_read_from_loose_packed_detached_and_linked_git_folders(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert checkout_commit(repo) is None  # not a git checkout
    git = repo / ".git"
    git.mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/dev\n")
    (git / "packed-refs").write_text(
        f"# pack-refs with: peeled\n{SHA} refs/heads/dev\n{'f' * 40} refs/tags/x\n"
    )
    assert checkout_commit(repo) == SHA
    (git / "HEAD").write_text("b" * 40 + "\n")
    assert checkout_commit(repo) == "b" * 40
    (git / "HEAD").write_text("ref: refs/heads/gone\n")
    assert checkout_commit(repo) is None
    # A worktree: `.git` is a file naming its folder, whose branches live in the main repository.
    linked = tmp_path / "linked"
    linked.mkdir()
    wt = git / "worktrees" / "linked"
    wt.mkdir(parents=True)
    (wt / "HEAD").write_text("ref: refs/heads/dev\n")
    (wt / "commondir").write_text("../..\n")
    (linked / ".git").write_text(f"gitdir: {wt}\n")
    assert checkout_commit(linked) == SHA


def test_the_command_imports_into_the_data_dir_or_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "var"))
    assert main(["envs", "import-tau2", "--from", str(MINI), "--domain", "retail", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["folder"] == str(tmp_path / "var" / "public" / "tau2" / "retail")
    assert out["tasks"] == 9 and out["splits"] == {"train": 4, "test": 5, "base": 9}
    assert load_domain(tmp_path / "var", "retail").manifest.commit is None  # the mini is no git checkout
    assert (
        main(["envs", "import-tau2", "--from", str(MINI), "--domain", "retail", "--out", str(tmp_path / "o")])
        == 0
    )
    assert "9 tasks (splits: train 4, test 5, base 9)" in capsys.readouterr().out
    assert load_domain_folder(tmp_path / "o" / "retail").manifest.tasks == 9
    with pytest.raises(FileNotFoundError, match="arena envs import-tau2"):
        load_domain(tmp_path / "var", "airline")
    # Listed as held out, never among the environments every phase draws from.
    assert main(["envs", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1] == "τ²-bench (held out, never trained on): retail (9 tasks, no commit)"
    assert not any(line.startswith(("retail", "airline")) for line in listed)


def _break(checkout: Path, case: str) -> None:
    data, code = checkout / DOMAIN, checkout / "src/tau2/domains/retail"
    tasks = json.loads((data / "tasks.json").read_text())
    if case == "no tasks":
        (data / "tasks.json").unlink()
    elif case == "no policy":
        (data / "policy.md").unlink()
    elif case == "db not json":
        (data / "db.json").write_text("{broken")
    elif case == "no tools":
        (code / "tools.py").unlink()
    elif case == "tools without tools":
        (code / "tools.py").write_text("class Nothing:\n    pass\n")
    elif case == "bad basis":
        tasks[2]["evaluation_criteria"]["reward_basis"] = ["DB", "VIBES"]
    elif case == "no scenario":
        del tasks[3]["user_scenario"]
    elif case == "unknown tool":
        tasks[0]["evaluation_criteria"]["actions"][0]["name"] = "delete_everything"
    elif case == "same id":
        tasks[1]["id"] = "0"
    elif case == "bad split":
        (data / "split_tasks.json").write_text('{"train": ["0", "42"]}')
    if case in ("bad basis", "no scenario", "unknown tool", "same id"):
        (data / "tasks.json").write_text(json.dumps(tasks))


def test_a_bad_checkout_is_named_and_a_failed_import_keeps_the_one_before(
    mini_checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "public" / "retail"
    import_tau2(MINI, "retail", dest)
    before = {p.name: p.read_bytes() for p in dest.iterdir()}
    cases = {
        "no tasks": "tasks.json is missing",
        "no policy": "policy.md is missing",
        "db not json": "db.json is not JSON",
        "no tools": "tools.py is missing",
        "tools without tools": "tools.py defines no @is_tool method",
        "bad basis": "task 2 (id '2'): evaluation_criteria.reward_basis.1: Input should be",
        "no scenario": "task 3 (id '3'): user_scenario: Field required",
        "unknown tool": "task 0 (id '0'): gold actions call tools the domain lacks: ['delete_everything']",
        "same id": "task ids used more than once: ['0']",
        "bad split": "split 'train' names tasks tasks.json lacks: ['42']",
    }
    for case, message in cases.items():
        broken = tmp_path / case.replace(" ", "_")
        shutil.copytree(mini_checkout, broken)
        _break(broken, case)
        with pytest.raises(
            CheckoutError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
        ):
            import_tau2(broken, "retail", dest)
        assert (
            main(
                [
                    "envs",
                    "import-tau2",
                    "--from",
                    str(broken),
                    "--domain",
                    "retail",
                    "--out",
                    str(dest.parent),
                ]
            )
            == 2
        )
        assert message in capsys.readouterr().err
    for folder, message in {
        tmp_path / "nowhere": "no such folder",
        mini_checkout / "src": "not a tau2-bench checkout (no data/tau2/domains folder here)",
    }.items():
        with pytest.raises(CheckoutError, match=message.replace("(", r"\(").replace(")", r"\)")):
            import_tau2(folder, "retail", dest)
    with pytest.raises(CheckoutError, match=r"no domain 'airline' in data/tau2/domains \(has retail\)"):
        import_tau2(mini_checkout, "airline", dest)
    with pytest.raises(CheckoutError, match="unknown τ² domain 'telecom'"):
        import_tau2(mini_checkout, "telecom", dest)
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == before
    assert sorted(p.name for p in dest.parent.iterdir()) == ["retail"]  # no staging folder left


def test_the_docstring_gives_the_description_and_each_parameter_text() -> None:
    specs = {
        s.name: s
        for s in tool_specs((CODE / "tools.py").read_text(), (CODE / "data_model.py").read_text())[0]
    }
    cancel = specs["cancel_pending_order"]
    # τ²'s description: the docstring's first line, a blank line, then the rest of its text.
    assert cancel.description == (
        "Cancel an order that is still pending,\n\nrefunding what was paid. Ask the customer to confirm first."
    )
    assert (
        cancel.parameters["properties"]["reason"]["description"]
        == "Why: 'no longer needed' or\n'ordered by mistake'."
    )
    assert specs["ping"].description == "Answer 'pong'." and specs["ping"].parameters == {
        "properties": {},
        "title": "parameters",
        "type": "object",
    }
    doc = parse_docstring(
        "Do it.\n\nArgs:\n    a (int): First.\n    b: Second,\n        continued.\nReturns:\n    x"
    )
    assert (doc.short, doc.long) == ("Do it.", "")
    assert doc.params == {"a": ("int", "First."), "b": (None, "Second,\ncontinued.")}


def _pydantic_reference(tools_py: Path, data_model_py: Path) -> dict[str, dict[str, Any]]:
    """Each tool's parameter schema as τ² builds it: pydantic's `create_model` of the signature."""
    spec = importlib.util.spec_from_file_location("tau2_mini_data_model", data_model_py)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the classes' annotations through it
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    namespace: dict[str, Any] = dict(vars(module))
    namespace.update({n: getattr(typing, n) for n in ("List", "Optional", "Union", "Dict", "Any")})
    out = {}
    for cls in (n for n in ast.parse(tools_py.read_text()).body if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.decorator_list:
                continue
            doc = parse_docstring(ast.get_docstring(fn, clean=False))
            args = fn.args.args[1:]
            defaults = [...] * (len(args) - len(fn.args.defaults)) + [
                ast.literal_eval(d) for d in fn.args.defaults
            ]
            pairs = list(zip(args, defaults, strict=True))
            pairs += [(a, ...) for a in fn.args.kwonlyargs]
            fields = {}
            for arg, default in pairs:
                type_name, text = doc.params.get(arg.arg, (None, None))
                source = ast.unparse(arg.annotation) if arg.annotation else type_name
                annotation = eval(source, namespace) if source else Any
                if isinstance(annotation, str):  # a forward reference
                    annotation = eval(annotation, namespace)
                fields[arg.arg] = (annotation, Field(default, description=text) if text else default)
            out[fn.name] = create_model("parameters", **fields).model_json_schema()
    return out


def test_the_parameter_schemas_are_the_ones_pydantic_writes() -> None:
    reference = _pydantic_reference(CODE / "tools.py", CODE / "data_model.py")
    specs, notes = tool_specs((CODE / "tools.py").read_text(), (CODE / "data_model.py").read_text())
    assert notes == [] and set(reference) == {s.name for s in specs}
    for spec in specs:  # same JSON text: same keys in the same order
        assert json.dumps(spec.parameters) == json.dumps(reference[spec.name]), spec.name
    assert "$defs" in specs[-2].parameters  # schedule_callback: the data model's classes


def test_a_type_it_cannot_resolve_is_left_untyped_and_noted() -> None:
    source = (
        "class T:\n    @is_tool()\n    def f(self, a: Mystery, b: int = 2):\n"
        '        """Do f.\n\n        Args:\n            a: A.\n        """\n'
    )
    specs, notes = tool_specs(source)
    assert specs[0].parameters["properties"]["a"] == {"description": "A.", "title": "A"}
    assert notes == ["f: type Mystery is not defined in tools.py or data_model.py: untyped"]


TAU2_CHECKOUT, TAU2_VENV = Path("/work/tau2-checkout"), Path("/work/tau2-venv/bin/python")
_TAU2_SCHEMAS = """
import json
from tau2.environment.toolkit import ToolKitBase
from tau2.domains.retail.tools import RetailTools
from tau2.domains.airline.tools import AirlineTools
def schemas(kit):
    return [t.openai_schema for t in kit.__new__(kit).get_tools().values()]
print(json.dumps({"retail": schemas(RetailTools), "airline": schemas(AirlineTools)}))
"""


@pytest.mark.slow
@pytest.mark.skipif(
    not (TAU2_CHECKOUT.is_dir() and TAU2_VENV.is_file()), reason="needs a tau2-bench checkout and its venv"
)
def test_the_schemas_of_a_real_checkout_are_tau2s_own() -> None:
    env = {**os.environ, "PYTHONPATH": str(TAU2_CHECKOUT / "src")}
    done = subprocess.run(
        [str(TAU2_VENV), "-c", _TAU2_SCHEMAS], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout)
    for domain in ("retail", "airline"):
        code = TAU2_CHECKOUT / "src/tau2/domains" / domain
        specs, notes = tool_specs((code / "tools.py").read_text(), (code / "data_model.py").read_text())
        assert notes == []
        assert json.dumps([s.openai() for s in specs]) == json.dumps(theirs[domain]), domain


def test_a_task_id_given_as_a_number_is_text() -> None:
    task = Tau2Task.model_validate({"id": 7, "user_scenario": {"instructions": "hi"}})
    assert task.id == "7" and task.evaluation_criteria.reward_basis == ["DB", "COMMUNICATE"]
