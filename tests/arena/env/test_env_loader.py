"""The loader reports every problem of a folder with its file and line or field."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from arena.env.errors import EnvLoadError, Problem
from arena.env.loader import folder_version, load_environment, split_sql
from arena.env.runtime import Environment

from .conftest import BROKEN, GOOD


def problems_of(path: Path) -> list[Problem]:
    with pytest.raises(EnvLoadError) as info:
        load_environment(path, cache=False)
    return info.value.problems


def find(problems: list[Problem], file: str, needle: str) -> Problem:
    hits = [p for p in problems if Path(p.path).name == file and needle in p.message]
    assert hits, f"no problem in {file} mentioning {needle!r}; got:\n" + "\n".join(map(str, problems))
    return hits[0]


def test_good_folder_loads_with_schemas_and_metadata(shop: Environment) -> None:
    assert shop.name == "shop" and shop.kind == "executable" and shop.origin == "user"
    assert shop.category == ["Shopping", "Online store"]
    assert [s.name for s in shop.tool_specs] == [
        "get_profile",
        "search_products",
        "get_order",
        "place_order",
        "cancel_order",
    ]
    assert shop.write_tools == ["place_order", "cancel_order"]
    cancel = next(s for s in shop.tool_specs if s.name == "cancel_order")
    assert cancel.parameters["required"] == ["order_id"]
    assert cancel.parameters["properties"]["reason"]["enum"] == ["mistake", "too_slow", "other"]
    assert len(shop.tests) == 9 and shop.tasks_path is None
    assert len(shop.version) == 12 and not shop.sandboxed


def test_every_problem_of_a_broken_folder_is_reported_with_location() -> None:
    problems = problems_of(BROKEN / "everything")
    # env.toml: pydantic field errors, located by line
    assert find(problems, "env.toml", "lower-case").field == "name"
    category = find(problems, "env.toml", "at least 1 item")
    assert (category.field, category.line) == ("category", 3)
    assert find(problems, "env.toml", "'executable' or 'simulated'").field == "kind"
    assert find(problems, "env.toml", "not an ISO 8601 time").line == 6
    assert find(problems, "env.toml", "unknown field").field == "colour"
    # SQL: the failing statement and its line, for every failing statement
    schema = find(problems, "schema.sql", "syntax error")
    assert schema.line == 4 and "CREATE TABLE oops" in schema.message
    assert find(problems, "seed.sql", "no such table: nowhere").line == 2
    assert find(problems, "seed.sql", "NOT NULL constraint failed").line == 3
    # tools.py: every broken definition, not only the first
    assert find(problems, "tools.py", "'item_id': missing type hint").line == 6
    assert find(problems, "tools.py", "'no_doc': missing docstring").line == 16
    assert find(problems, "tools.py", "unsupported parameter type").line == 21
    assert "first defined on line 31" in find(problems, "tools.py", "duplicate tool name 'get_item'").message
    # tests.toml: unknown tools, bad fields, broken expect_sql
    unknown = find(problems, "tests.toml", "unknown tool 'delete_item'")
    assert (unknown.line, unknown.field) == (6, "case[1].tool")
    assert find(problems, "tests.toml", "unknown field").field == "case[3].surprise"
    assert find(problems, "tests.toml", "no such table: missing_table").field == "case[2].expect_sql"
    assert len(problems) == 15


def test_bad_toml_and_missing_files() -> None:
    problems = problems_of(BROKEN / "bad_toml")
    bad = find(problems, "env.toml", "invalid TOML")
    assert bad.line == 3
    for name in ("schema.sql", "tools.py", "tests.toml"):
        assert find(problems, name, "missing file")


def test_import_error_in_tools_names_the_line() -> None:
    [problem] = problems_of(BROKEN / "import_error")
    assert Path(problem.path).name == "tools.py" and problem.line == 7
    assert "KeyError" in problem.message and "Traceback" not in problem.message


def test_syntax_error_in_tools(env_copy: Callable[[str], Path]) -> None:
    folder = env_copy("good/shop")
    tools = folder / "tools.py"
    tools.write_text(tools.read_text() + "\ndef broken(:\n    pass\n")
    [problem] = problems_of(folder)
    assert "SyntaxError" in problem.message
    assert problem.line == len(tools.read_text().splitlines()) - 1


def test_not_a_folder_and_empty_tools(env_copy: Callable[[str], Path], tmp_path: Path) -> None:
    assert "no such folder" in problems_of(tmp_path / "nope")[0].message
    folder = env_copy("good/gate")
    (folder / "tools.py").write_text('"""Nothing here."""\n')
    problems = problems_of(folder)
    assert find(problems, "tools.py", "defines no tools")
    (folder / "tests.toml").write_text("")
    assert find(problems_of(folder), "tests.toml", "no test cases")


def test_expect_error_with_expect_is_rejected(env_copy: Callable[[str], Path]) -> None:
    folder = env_copy("good/gate")
    with (folder / "tests.toml").open("a") as f:
        f.write(
            '\n[[case]]\ntool = "half"\nargs = { name = "a" }\nexpect_error = true\nexpect = { value = 1 }\n'
        )
    problem = find(problems_of(folder), "tests.toml", "cannot be combined")
    assert problem.field == "case[5]" and problem.line == 30


def test_version_is_a_content_hash(env_copy: Callable[[str], Path]) -> None:
    folder = env_copy("good/gate")
    v1 = folder_version(folder)
    assert v1 == folder_version(GOOD / "gate")  # same bytes, same version, wherever it lives
    (folder / "seed.sql").write_text("INSERT INTO counters VALUES ('a', 1);\n")
    assert folder_version(folder) != v1
    assert load_environment(folder).version == folder_version(folder)


def test_each_version_imports_tools_under_its_own_module(env_copy: Callable[[str], Path]) -> None:
    folder = env_copy("good/gate")
    first = load_environment(folder)
    assert load_environment(folder) is first  # cached per version
    tools = folder / "tools.py"
    tools.write_text(tools.read_text().replace('return {"value": row["value"]}', 'return {"value": -1}'))
    second = load_environment(folder)
    assert second.version != first.version
    assert first.tools["half"].fn.__module__ != second.tools["half"].fn.__module__
    assert first.new_instance().call_sync("half", {"name": "a"}).output == {"value": 1}
    assert second.new_instance().call_sync("half", {"name": "a"}).output == {"value": -1}


def test_synthesized_origin_is_sandboxed(
    env_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = env_copy("good/gate")
    with (folder / "env.toml").open("a") as f:
        f.write('origin = "synthesized"\n')
    env = load_environment(folder)
    assert env.origin == "synthesized" and env.sandboxed
    monkeypatch.setenv("ARENA_SANDBOX", "all")
    assert load_environment(GOOD / "shop").sandboxed


def test_split_sql_handles_comments_triggers_and_a_missing_semicolon() -> None:
    text = (
        "-- header\nCREATE TABLE a (x);\n\nCREATE TRIGGER t AFTER INSERT ON a BEGIN\n"
        "  UPDATE a SET x = 1;\nEND;\nINSERT INTO a VALUES (1)"
    )
    parts = split_sql(text)
    assert [line for line, _ in parts] == [2, 4, 7]
    assert parts[1][1].endswith("END;") and parts[2][1] == "INSERT INTO a VALUES (1)"
