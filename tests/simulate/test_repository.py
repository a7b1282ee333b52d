"""The hand-written tool repository: bundled simulated environments found by the registry."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from arena.env.registry import Registry
from arena.env.runtime import Environment
from ops.cli import main as cli_main
from simulate.simulators import filter_tools


@pytest.fixture(scope="module")
def simulated() -> dict[str, Environment]:
    envs = Registry(include_environ=False).load_all()
    return {name: env for name, env in envs.items() if env.kind == "simulated"}


def test_repository_size_and_domains(simulated: dict[str, Environment]) -> None:
    tools = sum(len(env.tool_specs) for env in simulated.values())
    domains = {tuple(env.category) for env in simulated.values()}
    assert tools >= 150, tools
    assert len(domains) >= 10 and all(len(c) == 2 for c in domains)
    assert all(
        env.origin == "bundled" and env.rules.strip() and env.description for env in simulated.values()
    )


def test_every_bundled_tool_passes_the_quality_filter(simulated: dict[str, Environment]) -> None:
    for env in simulated.values():
        _kept, dropped = filter_tools(env.tool_specs)
        assert not dropped, (env.name, [(d.name, d.reasons) for d in dropped])


def test_schemas_are_specific(simulated: dict[str, Environment]) -> None:
    # Hand-written means realistic: most tools take required arguments, many use enums, reads are marked.
    specs = [s for env in simulated.values() for s in env.tool_specs]
    with_required = sum(bool(s.parameters.get("required")) for s in specs)
    with_enum = sum(
        any("enum" in json.dumps(p) for p in s.parameters.get("properties", {}).values()) for s in specs
    )
    assert with_required / len(specs) > 0.75 and with_enum >= 50
    for env in simulated.values():
        assert 0 < len(env.write_tools) < len(env.tool_specs), env.name
    names = Counter(f"{env.name}.{s.name}" for env in simulated.values() for s in env.tool_specs)
    assert max(names.values()) == 1


def test_envs_list_shows_them_as_simulated(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.delenv("ARENA_ENV_PATH", raising=False)
    assert cli_main(["envs", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    for name in ("weather", "music_streaming", "ride_hailing", "stocks", "smart_home"):
        assert rows[name]["kind"] == "simulated"
    assert rows["food_delivery"]["kind"] == "executable"
