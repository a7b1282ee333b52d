"""`arena envs import-bfcl`: the pinned bfcl-eval wheel (fetched from PyPI by the test set-up, as a
user would) or an installed package folder becomes four held-out environments, one task per entry,
with the distribution's version recorded and the backend classes loaded from the copied modules
without bfcl's package or any of its dependencies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from arena.public.bfcl.dist import DistributionError
from arena.public.bfcl.importer import import_bfcl
from arena.public.bfcl.model import load_benchmark
from ops.cli import main
from tests.bfcl_dist import BFCL_VERSION

REPO = Path(__file__).resolve().parents[3]


def _wheel_lines(wheel: Path, name: str) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as z:
        return [
            json.loads(line) for line in z.read(f"bfcl_eval/{name}").decode().splitlines() if line.strip()
        ]


def test_the_wheel_becomes_four_held_out_environments_of_one_task_per_entry(
    bfcl: Any,
    bfcl_wheel: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bfcl.version == BFCL_VERSION and bfcl.manifest.source == str(bfcl_wheel)
    assert bfcl.manifest.categories == {"base": 200, "miss_func": 200, "miss_param": 200, "long_context": 200}
    for cat, entries in bfcl.entries.items():
        prompts = _wheel_lines(bfcl_wheel, f"data/BFCL_v4_multi_turn_{cat}.json")
        truth = _wheel_lines(bfcl_wheel, f"data/possible_answer/BFCL_v4_multi_turn_{cat}.json")
        assert [e.id for e in entries] == [p["id"] for p in prompts]  # a task's id is BFCL's entry id
        assert [e.ground_truth for e in entries] == [t["ground_truth"] for t in truth]
        assert {e.env for e in entries} == {f"bfcl_{cat}"}
    held = bfcl.entry("multi_turn_miss_func_0")
    assert held.missed_function == {3: ["sort"]} and held.turns[3] == []
    assert "sort" not in [t.name for t in bfcl.tools_at(held, 2)]
    assert [t.name for t in bfcl.tools_at(held, 3)][-1] == "sort"  # given back at its turn, last
    docs = _wheel_lines(bfcl_wheel, "data/multi_turn_func_doc/gorilla_file_system.json")
    assert [t.name for t in bfcl.tools["GorillaFileSystem"]] == [d["name"] for d in docs]
    schema = next(t for t in bfcl.tools["TravelAPI"] if t.name == "book_flight").parameters
    assert schema["type"] == "object" and "dict" not in json.dumps(schema)  # JSON schema types

    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "var"))
    assert main(["envs", "import-bfcl", "--from", str(bfcl_wheel), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["version"] == BFCL_VERSION and out["folder"] == str(tmp_path / "var" / "public" / "bfcl")
    assert out["environments"] == {
        f"bfcl_{c}": 200 for c in ("base", "miss_func", "miss_param", "long_context")
    }
    # Held out: the environment registry (what every phase draws from) does not see them.
    from arena.env.registry import discover

    assert not any(name.startswith("bfcl") for name in discover([tmp_path / "var" / "envs"]))
    assert main(["envs", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("bfcl") for line in listed)
    assert listed[-2].startswith("public benchmarks (held out, never trained on; bfcl-eval 2026.3.23)")


def test_an_installed_package_folder_imports_the_same_as_the_wheel(
    bfcl: Any, bfcl_wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(bfcl_wheel) as z:
        z.extractall(site)
    for source in (site, site / "bfcl_eval"):
        manifest = import_bfcl(source, tmp_path / "out")
        assert manifest.version == BFCL_VERSION
        again = load_benchmark(tmp_path / "out")
        assert again.entries == bfcl.entries and again.tools == bfcl.tools
        assert again.backend() == bfcl.backend()


def test_the_backend_loads_without_bfcl_or_any_of_its_dependencies(bfcl_wheel: Path, tmp_path: Path) -> None:
    """In a fresh interpreter that refuses to import bfcl_eval or any of its pinned dependencies."""
    script = f"""
import sys
BLOCKED = ("bfcl_eval", "numpy", "pandas", "torch", "sentence_transformers", "faiss", "openai", "tree_sitter",
           "huggingface_hub", "anthropic", "qwen_agent", "rank_bm25", "serpapi", "bs4", "requests")
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError("blocked in this test: " + name)
sys.meta_path.insert(0, Refuse())
import anyio
from pathlib import Path
from arena.env.object_runtime import ObjectRunner
from arena.public.bfcl.gold import GoldReplayPolicy
from arena.public.bfcl.importer import import_bfcl
from arena.public.bfcl.model import load_benchmark
from arena.public.bfcl.run import play
import_bfcl(Path({str(bfcl_wheel)!r}), Path({str(tmp_path / "bfcl")!r}))
bench = load_benchmark(Path({str(tmp_path / "bfcl")!r}))
runner = ObjectRunner(bench.backend(), "bfcl")
seen, played, passed = set(), 0, 0
async def main():
    global played, passed
    for cat in bench.entries.values():
        for e in cat:
            if not set(e.involved_classes) <= seen:
                seen.update(e.involved_classes)
                played += 1
                passed += (await play(GoldReplayPolicy(e), bench, e, runner)).verdict.passed
anyio.run(main)
assert seen == set(bench.manifest.classes), seen
print(played, passed, sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    played, passed, loaded = done.stdout.strip().split(" ", 2)
    assert int(played) >= 4 and passed == played and loaded == "[]"


def test_a_bad_source_is_named_and_a_failed_import_keeps_the_one_before(
    bfcl_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "bfcl"
    import_bfcl(bfcl_wheel, dest)
    before = (dest / "manifest.json").read_text()
    not_a_wheel = tmp_path / "notes.whl"
    not_a_wheel.write_text("hello")
    broken = tmp_path / "broken.whl"
    with zipfile.ZipFile(bfcl_wheel) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            if not item.filename.endswith("possible_answer/BFCL_v4_multi_turn_long_context.json"):
                dst.writestr(item, src.read(item))
    cases = {
        tmp_path / "nowhere": "no such file or folder",
        not_a_wheel: "not a wheel",
        tmp_path: "no bfcl_eval/constants/executable_backend_config.py here",
        broken: "possible_answer/BFCL_v4_multi_turn_long_context.json is missing",
    }
    for source, message in cases.items():
        with pytest.raises(DistributionError, match=message):
            import_bfcl(source, dest)
        assert main(["envs", "import-bfcl", "--from", str(source), "--out", str(dest)]) == 2
        assert message in capsys.readouterr().err
    assert (dest / "manifest.json").read_text() == before
    assert not list(tmp_path.glob("bfcl.*"))  # no staging folder left behind
