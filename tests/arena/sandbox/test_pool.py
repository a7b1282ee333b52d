"""Normal work through the sandbox pool: tool calls, tool listings, python checks, programs."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from arena.sandbox import ProgramEnv, SandboxPool, SandboxProgramError

from .conftest import NOW, SHOP, query

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(workers=2) as p:
        yield p


async def test_read_tool_returns_result_and_leaves_state(pool: SandboxPool, shop_image: bytes) -> None:
    out = await pool.call_tool(
        SHOP, shop_image, now=NOW, user_id=1, id_counters={}, tool="get_item", arguments={"item_id": "IT-1"}
    )
    assert out.ok and out.error is None
    assert out.result == {"item_id": "IT-1", "name": "Teapot", "price": 24.5, "stock": 3}
    assert out.db_image is shop_image and not out.writes


async def test_write_tool_returns_new_image_and_counters(pool: SandboxPool, shop_image: bytes) -> None:
    out = await pool.call_tool(
        SHOP,
        shop_image,
        now=NOW,
        user_id=1,
        id_counters={"ORD": 4},
        tool="place_order",
        arguments={"item_id": "IT-1"},
    )
    assert out.ok, out.error
    assert out.result == {"order_id": "ORD-N0005", "status": "placed"}
    assert out.id_counters == {"ORD": 5} and out.writes
    assert query(
        out.db_image, "SELECT user_id, status, created_at FROM orders WHERE order_id = 'ORD-N0005'"
    ) == [(1, "placed", NOW)]
    assert query(out.db_image, "SELECT stock FROM items WHERE item_id = 'IT-1'") == [(2,)]
    assert query(shop_image, "SELECT count(*) FROM orders") == [(2,)]


@pytest.mark.parametrize(
    ("tool", "arguments", "kind", "fragment"),
    [
        ("place_order", {"item_id": "IT-2"}, "tool_error", "out of stock"),
        ("place_order", {"item_id": 7, "extra": 1}, "invalid_arguments", "extra"),
        ("no_such_tool", {}, "unknown_tool", "get_item"),
        ("sneaky_write", {"item_id": "IT-1"}, "read_only", "read tool"),
    ],
)
async def test_tool_faults_are_clean_errors(
    pool: SandboxPool, shop_image: bytes, tool: str, arguments: dict, kind: str, fragment: str
) -> None:
    out = await pool.call_tool(
        SHOP, shop_image, now=NOW, user_id=1, id_counters={"ORD": 1}, tool=tool, arguments=arguments
    )
    assert not out.ok and out.error_kind == kind
    assert fragment in (out.error or "")
    assert out.db_image is shop_image and out.id_counters == {"ORD": 1}
    assert pool.kills == 0


async def test_changed_tools_file_is_reloaded(pool: SandboxPool, shop_image: bytes, tmp_path: Path) -> None:
    env = tmp_path / "shop"
    shutil.copytree(SHOP, env)
    infos = await pool.describe_tools(env)
    assert {(i.spec.name, i.writes) for i in infos} == {
        ("get_item", False),
        ("place_order", True),
        ("sneaky_write", False),
    }
    tools = env / "tools.py"
    tools.write_text(tools.read_text().replace("return item\n", 'return {**item, "v": 2}\n'))
    out = await pool.call_tool(
        env, shop_image, now=NOW, user_id=1, id_counters={}, tool="get_item", arguments={"item_id": "IT-1"}
    )
    assert out.result["v"] == 2
    tools.write_text("def broken(:\n")
    with pytest.raises(SandboxProgramError, match=r"tools\.py does not load: SyntaxError"):
        await pool.describe_tools(env)


async def test_python_check(pool: SandboxPool, shop_image: bytes) -> None:
    after = (
        await pool.call_tool(
            SHOP,
            shop_image,
            now=NOW,
            user_id=1,
            id_counters={},
            tool="place_order",
            arguments={"item_id": "IT-1"},
        )
    ).db_image
    source = (
        "def check(initial, final, answer):\n"
        "    before = initial.execute('SELECT count(*) FROM orders').fetchone()[0]\n"
        "    now = final.execute('SELECT count(*) FROM orders').fetchone()[0]\n"
        "    return now == before + 1 and 'ORD-N0001' in answer\n"
    )
    assert await pool.run_check(source, shop_image, after, "Your order ORD-N0001 is placed.") is True
    assert await pool.run_check(source, shop_image, shop_image, "Your order ORD-N0001 is placed.") is False
    with pytest.raises(SandboxProgramError, match=r"ZeroDivisionError.*<check> line 2"):
        await pool.run_check("def check(i, f, a):\n    return 1 / 0\n", shop_image, after, "")
    with pytest.raises(SandboxProgramError, match="returned int, not bool"):
        await pool.run_check("def check(i, f, a):\n    return 1\n", shop_image, after, "")
    with pytest.raises(SandboxProgramError, match="readonly"):
        await pool.run_check(
            "def check(i, f, a):\n    f.execute('DELETE FROM orders')\n", shop_image, after, ""
        )


async def test_a_check_cannot_tamper_with_later_checks(pool: SandboxPool, shop_image: bytes) -> None:
    tamper = (
        "import arena.sandbox.jobs as jobs\n\n"
        "def check(initial, final, answer):\n"
        "    jobs.run_check = lambda job: ({'ok': True, 'value': True}, [])\n"
        "    return False\n"
    )
    honest = "def check(initial, final, answer):\n    return answer == 'yes'\n"
    for _ in range(pool.size):  # every worker runs the tampering check once
        assert await pool.run_check(tamper, shop_image, shop_image, "") is False
    for _ in range(pool.size * 2):
        assert await pool.run_check(honest, shop_image, shop_image, "no") is False


async def test_run_program_json_in_and_out(pool: SandboxPool) -> None:
    source = "import statistics\n\ndef main(payload):\n    print('hello')\n    return {'mean': statistics.mean(payload['xs'])}\n"
    assert await pool.run_program(source, "main", {"xs": [1, 2, 3, 6]}) == {"mean": 3}
    outcome = await pool.execute_program(source, "main", {"xs": [2]})
    assert outcome.stdout == "hello\n" and outcome.result == {"mean": 2}
    with pytest.raises(SandboxProgramError, match="non-JSON"):
        await pool.run_program("def main(p):\n    return {1, 2}\n", "main", {})
    with pytest.raises(SandboxProgramError, match="no function named 'go'"):
        await pool.run_program("def main(p):\n    return 1\n", "go", {})


async def test_program_calls_environment_tools(pool: SandboxPool, shop_image: bytes) -> None:
    source = (
        "from arena.env import ToolError\n\n"
        "def solve(payload, tools):\n"
        "    item = tools.get_item(item_id=payload['item'])\n"
        "    try:\n"
        "        tools.call('place_order', {'item_id': 'IT-2'})\n"
        "    except ToolError:\n"
        "        pass\n"
        "    order = tools.place_order(item_id=item['item_id'])\n"
        "    return order['order_id']\n"
    )
    env = ProgramEnv(env_dir=str(SHOP), db_image=shop_image, now=NOW, user_id=2, id_counters={"ORD": 9})
    outcome = await pool.execute_program(source, "solve", {"item": "IT-1"}, env=env)
    assert outcome.result == "ORD-N0010"
    assert [(c.tool, c.ok) for c in outcome.calls] == [
        ("get_item", True),
        ("place_order", False),
        ("place_order", True),
    ]
    assert outcome.calls[1].error == "IT-2 is out of stock"
    assert outcome.id_counters == {"ORD": 10}
    assert outcome.db_image is not None
    assert query(outcome.db_image, "SELECT user_id FROM orders WHERE order_id = 'ORD-N0010'") == [(2,)]


async def test_bench_reports_sandboxed_call_latency(pool: SandboxPool) -> None:
    from arena.sandbox.bench import bench_sandboxed_calls

    result = await bench_sandboxed_calls(
        SHOP, tool="get_item", arguments={"item_id": "IT-1"}, calls=20, warmup=2, pool=pool
    )
    assert result["calls"] == 20 and result["kills"] == 0
    assert 0 < result["worker_p50_us"] < result["call_p50_us_sandboxed"] <= result["call_p90_us_sandboxed"]
