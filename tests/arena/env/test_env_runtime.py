"""Instances: private copies, clean error observations, read-only enforcement, replay, diff."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from arena.env.instance import EnvInstance
from arena.env.loader import load_environment
from arena.env.runtime import Environment, SandboxRequiredError
from arena.env.state import dump_state, states_equal

CALLS = [
    ("place_order", {"product_id": "P-100", "quantity": 2}),
    ("cancel_order", {"order_id": "ORD-1002", "reason": "mistake"}),
    ("place_order", {"product_id": "P-200"}),
    ("cancel_order", {"order_id": "ORD-1001"}),  # refused: shipped
]


def test_instances_are_isolated_from_each_other_and_the_template(shop: Environment) -> None:
    a, b = shop.new_instance(), shop.new_instance()
    assert a.call_sync("cancel_order", {"order_id": "ORD-1002"}).ok
    status = "SELECT status FROM orders WHERE order_id = 'ORD-1002'"
    assert a.db.one(status) == {"status": "cancelled"}
    assert b.db.one(status) == {"status": "placed"}
    assert a.initial.execute(status).fetchone() == ("placed",)
    assert shop.new_instance().db.one(status) == {"status": "placed"}
    a.close()
    b.close()


def test_async_call_satisfies_the_instance_protocol(shop: Environment) -> None:
    async def main() -> None:
        inst = shop.new_instance()
        assert isinstance(inst, EnvInstance)
        result = await inst.call("get_profile", {})
        assert result.ok and result.output["name"] == "Ada Lovelace" and result.duration_us > 0
        await inst.aclose()

    anyio.run(main)


def test_replaying_the_same_calls_gives_the_same_state_and_results(shop: Environment) -> None:
    runs = []
    for _ in range(2):
        inst = shop.new_instance()
        results = [inst.call_sync(name, args).model_dump(exclude={"duration_us"}) for name, args in CALLS]
        runs.append((results, dump_state(inst.db.connection), inst))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    assert states_equal(runs[0][2].db.connection, runs[1][2].db.connection)
    assert runs[0][0][2]["output"]["order_id"] == "ORD-N0002"  # deterministic ids
    assert runs[0][0][0]["output"]["created_at"] == "2025-06-01T09:00:00"  # env.toml's `now`


def test_error_observations_are_clean(shop: Environment) -> None:
    inst = shop.new_instance()
    unknown = inst.call_sync("drop_tables", {})
    assert (unknown.ok, unknown.error_kind) == (False, "unknown_tool") and "get_order" in unknown.error
    bad = inst.call_sync("place_order", {"product_id": "P-100", "quantity": "many", "colour": 1})
    assert bad.error_kind == "invalid_arguments"
    assert "quantity" in bad.error and "colour" in bad.error
    missing = inst.call_sync("get_order", {})
    assert missing.error_kind == "invalid_arguments" and "order_id" in missing.error
    refused = inst.call_sync("place_order", {"product_id": "P-300"})
    assert (refused.error_kind, refused.error) == ("tool_error", "only 0 of P-300 left")
    assert not inst.changed


def test_a_refused_write_is_rolled_back_with_its_ids(shop: Environment) -> None:
    inst = shop.new_instance()
    # cancel_order writes an audit line before refusing a shipped order: that line must not stay.
    assert inst.call_sync("cancel_order", {"order_id": "ORD-1001"}).error_kind == "tool_error"
    assert inst.diff().empty and inst.db.all("SELECT * FROM audit_log") == []
    # A refused call consumes no id either: the next order still gets the first one.
    assert inst.call_sync("place_order", {"product_id": "P-100", "quantity": 9}).ok is False
    assert inst.call_sync("place_order", {"product_id": "P-100"}).output["order_id"] == "ORD-N0001"


def crashing_env(folder: Path) -> Environment:
    tools = folder / "tools.py"
    tools.write_text(
        tools.read_text()
        + '''

@tool
def sneaky_read(db: Db, name: str) -> dict:
    """A read-only tool that tries to write.

    Args:
        name: Counter name.
    """
    db.execute("UPDATE counters SET value = 0 WHERE name = ?", name)
    return {}


@tool
def crash(db: Db) -> dict:
    """A tool with a bug."""
    return {"x": 1 / 0}


@tool(writes=True)
def crash_after_write(db: Db) -> dict:
    """A write tool with a bug after its first write."""
    db.execute("UPDATE counters SET value = 100")
    return {"bad": object()}
'''
    )
    return load_environment(folder)


def test_read_only_tools_cannot_write_and_crashes_become_observations(
    env_copy: Callable[[str], Path],
) -> None:
    env = crashing_env(env_copy("good/gate"))
    inst = env.new_instance()
    sneaky = inst.call_sync("sneaky_read", {"name": "a"})
    assert (sneaky.ok, sneaky.error_kind) == (False, "read_only") and "read-only" in sneaky.error
    crash = inst.call_sync("crash", {})
    assert (
        crash.error_kind == "internal"
        and crash.error == "internal error in crash: ZeroDivisionError: division by zero"
    )
    assert "Traceback" not in crash.error
    not_json = inst.call_sync("crash_after_write", {})
    assert not_json.error_kind == "internal" and not_json.writes
    assert inst.diff().empty and not inst.changed
    assert inst.call_sync("half", {"name": "a"}).output == {"value": 1}  # the instance still works


def test_snapshot_image_and_custom_initial_state(shop: Environment) -> None:
    inst = shop.new_instance()
    inst.call_sync("place_order", {"product_id": "P-100"})
    snap = inst.snapshot()
    inst.call_sync("cancel_order", {"order_id": "ORD-N0001"})
    assert snap.execute("SELECT status FROM orders WHERE order_id = 'ORD-N0001'").fetchone() == ("placed",)
    # An instance can start from any image (e.g. a complexified database).
    other = shop.new_instance(image=inst.image(), user_id=2)
    assert other.db.user_id == 2 and other.diff().empty
    assert other.initial.execute("SELECT status FROM orders WHERE order_id = 'ORD-N0001'").fetchone() == (
        "cancelled",
    )
    assert other.call_sync("get_order", {"order_id": "ORD-2001"}).ok  # user 2's own order
    other.close()


def test_synthesized_code_never_runs_in_process(env_copy: Callable[[str], Path], tmp_path: Path) -> None:
    folder = env_copy("good/gate")
    marker = tmp_path / "imported"
    tools = folder / "tools.py"
    # Importing this file would leave a marker: loading must read it without running it.
    tools.write_text(
        tools.read_text().replace(
            "from arena.env import Db, ToolError, tool\n",
            f"from pathlib import Path\n\nfrom arena.env import Db, ToolError, tool\n\nPath({str(marker)!r}).touch()\n",
        )
    )
    with (folder / "env.toml").open("a") as f:
        f.write('origin = "synthesized"\n')
    env = load_environment(folder)
    assert not marker.exists()
    assert env.sandboxed and env.tool_names == ["half", "two_thirds", "untested"]
    assert env.write_tools == ["two_thirds"] and env.tools == {} and not env.described
    with pytest.raises(SandboxRequiredError, match="describe"):
        env.new_instance()


def test_a_sandboxed_environment_needs_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    from .conftest import GOOD

    monkeypatch.setenv("ARENA_SANDBOX", "all")
    with pytest.raises(SandboxRequiredError, match="must run in the sandbox"):
        load_environment(GOOD / "gate").new_instance()


def test_synthesized_tools_are_checked_statically(env_copy: Callable[[str], Path]) -> None:
    from arena.env.errors import EnvLoadError

    folder = env_copy("good/gate")
    tools = folder / "tools.py"
    tools.write_text(
        tools.read_text() + '\n\n@tool(name="half")\ndef again(db: Db) -> int:\n    """Again."""\n'
    )
    (folder / "tests.toml").write_text('[[case]]\ntool = "ghost"\n')
    with (folder / "env.toml").open("a") as f:
        f.write('origin = "synthesized"\n')
    with pytest.raises(EnvLoadError) as info:
        load_environment(folder)
    messages = [str(p) for p in info.value.problems]
    assert any("duplicate tool name 'half' (first defined on line 6)" in m for m in messages)
    assert any("unknown tool 'ghost'" in m for m in messages)
    tools.write_text("def broken(:\n")
    with pytest.raises(EnvLoadError, match="SyntaxError"):
        load_environment(folder)


def test_simulated_environment_has_specs_but_no_executable_instances() -> None:
    from .conftest import GOOD

    env = load_environment(GOOD / "weather_sim")
    assert env.kind == "simulated" and [s.name for s in env.tool_specs] == [
        "get_forecast",
        "subscribe_alerts",
    ]
    assert env.write_tools == ["subscribe_alerts"]
    assert env.tool_specs[0].parameters["required"] == ["city"]
    with pytest.raises(TypeError, match="simulated"):
        env.new_instance()
