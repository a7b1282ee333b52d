"""The Python-object environment kind on a small backend of its own (not BFCL's): loading modules
that import each other, inert stand-ins, reset from a configuration, calls that are never `eval`ed,
snapshots, state comparison with the classes' own equality, and the sandboxed path giving the same
replies as the in-process one."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from arena.env.object_calls import call_text, execute
from arena.env.object_runtime import ObjectRunner
from arena.env.objects import (
    Backend,
    BackendSource,
    Comparison,
    Session,
    Track,
    TracksRequest,
    differences,
    read_backend,
    run_tracks,
)

# A pydantic "database" behind methods, in a package whose modules import each other.
MODELS = """
from pydantic import BaseModel

class Note(BaseModel):
    title: str
    body: str = ""
"""
NOTES = """
import subprocess
from shop.models import Note
from .util import clean

class Notebook:
    def __init__(self):
        self.notes = {}
        self._opened = 0

    def _load_scenario(self, config, long_context=False):
        self.notes = {k: Note(**v) for k, v in config.get("notes", {}).items()}
        if long_context:
            self.notes["extra"] = Note(title="extra")

    def add(self, key: str, title: str, body: str = ""):
        self._opened += 1
        self.notes[key] = Note(title=clean(title), body=body)
        return {"added": key}

    def count(self):
        return len(self.notes)

    def titles(self):
        return [n.title for n in self.notes.values()]

    def shell(self):
        return subprocess.run(["ls"])

class Clock:
    def now(self):
        return "2025-01-01"
"""
UTIL = "def clean(text):\n    return text.strip().title()\n"
SOURCE = BackendSource(
    modules={"shop.models": MODELS, "shop.notes": NOTES, "shop.util": UTIL},
    classes={"Notebook": "shop.notes", "Clock": "shop.notes"},
    setup="_load_scenario",
    stateless=["Clock"],
    unavailable=["subprocess"],
)
CONFIG = {"Notebook": {"notes": {"a": {"title": "First"}}}}


def test_a_session_resets_from_its_configuration_and_runs_calls_as_text() -> None:
    backend = Backend(SOURCE)
    s = Session(backend, ["Notebook", "Clock"], CONFIG)
    assert s.call("count()") == "1" and s.call("now()") == "2025-01-01"
    assert s.call(call_text("add", {"key": "b", "title": "  second "})) == json.dumps({"added": "b"})
    assert s.call("titles()") == "['First', 'Second']"  # not a dict: str(), as BFCL shows it
    assert s.snapshot()["Notebook"]["notes"]["b"].startswith("Note(")  # other objects by repr
    assert "_opened" not in s.snapshot()["Notebook"]  # private attributes are no state
    assert Session(backend, ["Notebook"], CONFIG, {"long_context": True}).call("count()") == "2"
    # The configuration is copied at reset: a session never changes what the next one starts from.
    assert Session(backend, ["Notebook"], CONFIG).call("count()") == "1"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("missing()", "name 'missing' is not defined"),
        ("count(__import__('os'))", "name '__import__' is not defined"),
        ("add(key='k', title=open('/etc/passwd'))", "name 'open' is not defined"),
        ("add(key='k', title=open('/etc/passwd').read())", "unsupported call target"),
        ("add(key='k', title='a' + 'b')", "unsupported argument"),
        ("count.__class__()", "unsupported call target"),
        ("[1, 2]", "not a call"),
        ("count(", "was never closed"),
        ("exit()", "Function call exit is not allowed."),
        ("add(**{'key': 'k'})", "argument unpacking is not supported"),
        ("shell()", "module 'subprocess' is not available"),
        ("count(1)", "takes 1 positional argument but 2 were given"),
    ],
)
def test_a_call_is_parsed_never_evaluated_and_every_failure_is_a_result(text: str, error: str) -> None:
    s = Session(Backend(SOURCE), ["Notebook"], CONFIG)
    result = s.call(text)
    assert result.startswith("Error during execution: ") and error in result
    assert s.call("count()") == "1"  # nothing changed


def test_state_compares_with_the_classes_equality_and_names_what_differs() -> None:
    backend = Backend(SOURCE)
    a, b = Session(backend, ["Notebook"], CONFIG), Session(backend, ["Notebook"], CONFIG)
    assert differences(a, b) == []
    a.call("add(key='b', title='x')")
    assert differences(a, b) == ["Notebook.notes"]
    b.call("add(key='b', title=' X ')")  # pydantic equality: the same note
    assert differences(a, b) == []  # `_opened` differs too, but it is private


def test_tracks_are_played_turn_by_turn_and_compared_where_asked() -> None:
    track = Track(classes=["Notebook"], config=CONFIG)
    request = TracksRequest(
        tracks={
            "model": track.model_copy(update={"turns": [["add(key='b', title='x')"], ["count()"]]}),
            "truth": track.model_copy(update={"turns": [[], ["add(key='b', title='x')", "count()"]]}),
        },
        compare=[
            Comparison(turn=0, track="model", reference="truth"),
            Comparison(turn=1, track="model", reference="truth"),
        ],
        snapshot=True,
    )
    reply = run_tracks(Backend(SOURCE), request)
    assert reply.results == {"model": [['{"added": "b"}'], ["2"]], "truth": [[], ['{"added": "b"}', "2"]]}
    assert reply.differences == [["Notebook.notes"], []]
    assert set(reply.snapshots["model"]["Notebook"]["notes"]) == {"a", "b"}


def test_a_backend_folder_is_read_from_its_manifest(tmp_path: Path) -> None:
    for name, text in {"models.py": MODELS, "notes.py": NOTES, "util.py": UTIL}.items():
        (tmp_path / name).write_text(text)
    manifest = {
        "modules": {"shop.models": "models.py", "shop.notes": "notes.py", "shop.util": "util.py"},
        "classes": {"Notebook": "shop.notes"},
        "setup": "_load_scenario",
        "unavailable": ["subprocess"],
    }
    (tmp_path / "backend.json").write_text(json.dumps(manifest))
    assert Session(Backend(read_backend(tmp_path)), ["Notebook"], CONFIG).call("count()") == "1"
    (tmp_path / "backend.json").write_text(json.dumps({**manifest, "modules": {"shop.notes": "../x.py"}}))
    with pytest.raises(ValueError, match="outside the folder"):
        read_backend(tmp_path)
    with pytest.raises(ValueError, match=r"backend\.json"):
        read_backend(tmp_path / "nowhere")


def test_a_backend_changing_the_decimal_precision_changes_it_for_its_call_only() -> None:
    import decimal

    code = "from decimal import getcontext\nclass Calc:\n    def narrow(self):\n        getcontext().prec = 3\n        return str(getcontext().prec)\n"
    source = BackendSource(modules={"calc": code}, classes={"Calc": "calc"})
    before = decimal.getcontext().prec
    assert Session(Backend(source), ["Calc"], {}).call("narrow()") == "3"
    assert decimal.getcontext().prec == before


def test_a_backend_is_loaded_once_per_content_in_a_process() -> None:
    """A daemon makes a runner every round: its modules must not pile up in `sys.modules`."""
    import sys

    first = ObjectRunner(SOURCE, "a").backend()
    before = len(sys.modules)
    assert ObjectRunner(SOURCE, "b").backend() is first and len(sys.modules) == before
    other = SOURCE.model_copy(update={"stateless": ["Clock", "Notebook"]})
    assert ObjectRunner(other, "c").backend() is not first


def test_an_unknown_class_or_a_broken_module_is_named() -> None:
    with pytest.raises(KeyError, match="no class Missing"):
        Session(Backend(SOURCE), ["Missing"], {})
    broken = SOURCE.model_copy(update={"modules": {**SOURCE.modules, "shop.util": "def clean(:\n"}})
    with pytest.raises(SyntaxError):
        Backend(broken)
    assert execute("f()", {"f": lambda: {"not json": {1, 2}}}) == "{'not json': {1, 2}}"


def test_the_sandboxed_path_replays_to_the_same_replies_and_confines_the_code() -> None:
    anyio.run(_sandboxed_and_in_process)


async def _sandboxed_and_in_process() -> None:
    from arena.sandbox import SandboxPool, SandboxProgramError, SandboxViolation

    hostile = SOURCE.model_copy(
        update={
            "modules": {
                **SOURCE.modules,
                "shop.util": "import socket\ndef clean(t):\n    socket.socket()\n    return t\n",
            }
        }
    )
    async with SandboxPool(workers=1) as pool:
        local, boxed = ObjectRunner(SOURCE, "notes"), ObjectRunner(SOURCE, "notes", pool)
        for runner in (local, boxed):
            session = runner.session(["Notebook"], CONFIG)
            assert await session.step(["add(key='b', title='x')", "count()"]) == ['{"added": "b"}', "2"]
            assert await session.step(["count()"]) == ["2"]  # the sandbox replays the history first
            assert set((await session.snapshot())["Notebook"]["notes"]) == {"a", "b"}
        request = TracksRequest(
            tracks={"t": Track(classes=["Notebook"], config=CONFIG, turns=[["titles()"]])}
        )
        assert await boxed.run(request) == await local.run(request)
        with pytest.raises(SandboxProgramError, match="no class Missing"):
            await boxed.run(TracksRequest(tracks={"t": Track(classes=["Missing"])}))
        with pytest.raises(SandboxViolation) as killed:
            await (
                ObjectRunner(hostile, "hostile", pool)
                .session(["Notebook"], CONFIG)
                .step(["add(key='c', title='x')"])
            )
        assert killed.value.kind == "forbidden"
