"""The container image every pod runs (`Dockerfile`) agrees with what runs it and what it installs.

No container engine runs here, so the image is not built in the suite. What can go wrong without
one is checked instead: the user and commands the manifests expect, pyproject's pins and
packages, and that the package as the image installs it (a wheel, not the editable checkout)
carries every file the service reads at run time: bundled environments, migrations, prompts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
IMAGE = "ghcr.io/example/arena"


def _instructions(name: str) -> list[str]:
    """The arguments of every `name` instruction (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [m.group(1).strip() for m in re.finditer(rf"^{name}\s+(.+)$", joined, re.MULTILINE)]


def _dicts(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in `node`, at any depth."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _dicts(value)
    elif isinstance(node, list):
        for item in node:
            yield from _dicts(item)


def _manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((REPO / "deploy" / "k8s").rglob("*.yaml")):
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict | list))
    return docs


def test_the_image_runs_as_the_user_the_manifests_and_the_unit_name() -> None:
    [user] = _instructions("USER")
    uid, gid = user.split(":")
    ids = {d[k] for d in _dicts(_manifests()) for k in ("runAsUser", "runAsGroup", "fsGroup") if k in d}
    assert ids == {int(uid)} == {int(gid)}
    # The systemd unit's user has the same name, so files on a shared data volume keep one owner.
    assert "User=arena" in (REPO / "deploy" / "systemd" / "arena.service").read_text()
    assert re.search(rf"useradd .*--uid {uid} .*arena", " ".join(_instructions("RUN")))


def test_the_image_installs_what_pyproject_pins_with_the_cluster_extra() -> None:
    [base] = _instructions("FROM")
    python = re.match(r"python:(\d+\.\d+)", base)
    assert python and f">={python.group(1)}" in PYPROJECT["project"]["requires-python"]
    torch_pin = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("torch=="))
    assert f"ARG TORCH_VERSION={torch_pin.removeprefix('torch==')}" in DOCKERFILE
    assert (
        'pip install ".[cluster]"' in DOCKERFILE
        and "cluster" in PYPROJECT["project"]["optional-dependencies"]
    )
    # Every top-level package pyproject installs is copied in, and none is left out by .dockerignore.
    packages = set(_packages())
    copied = {args.split()[0] for args in _instructions("COPY")}
    assert packages <= copied
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert not (copied & ignored), copied & ignored
    [entry] = _instructions("ENTRYPOINT")
    assert entry.endswith('"arena"]') and "arena" in PYPROJECT["project"]["scripts"]


def test_every_container_of_the_image_runs_an_existing_command() -> None:
    """A container of the Arena image either runs `arena <command>` (the entrypoint; its args) or
    names its own command, which the image must have (`ray`, from the cluster extra)."""
    from ops.cli import main

    specs = [c for c in _dicts(_manifests()) if str(c.get("image", "")).startswith(IMAGE)]
    # The daemon, its migration, its Ray node, and the RayCluster's head and workers.
    assert len(specs) >= 5, specs
    commands = {tuple(spec["command"]) for spec in specs if "command" in spec}
    assert commands <= {("ray",)}
    for spec in specs:
        if "command" in spec or "args" not in spec:
            continue  # KubeRay gives the Ray pods their `ray start` command
        with pytest.raises(SystemExit) as exit_:
            main([spec["args"][0], "--help"])
        assert exit_.value.code == 0, spec["args"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git lists the tracked files")
def test_the_installed_package_carries_every_file_the_service_reads(tmp_path: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", *_packages()],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    source = tmp_path / "src"  # a copy: building in the checkout would leave build/ behind
    for name in [*tracked, "pyproject.toml", "README.md"]:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("*.whl")
    inside = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(name for name in tracked if name not in inside)
    assert not missing, f"files the image would lack: {missing[:20]}"


def _packages() -> list[str]:
    """The top-level packages pyproject installs (its `packages.find` include patterns)."""
    return sorted(p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
