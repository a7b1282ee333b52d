"""The sandbox worker process: `python -m arena.sandbox.worker`, started by `SandboxPool`.

Startup, in this order (order matters): keep the pipes on private fds and point 0/1 at /dev/null
(stray prints must not corrupt the protocol); read the setup frame; import every trusted module a
job may need; confine the process (`arena.sandbox.confine`); install the audit hook and fork
tripwire (`arena.sandbox.guard`); report which layers hold. Then serve jobs one at a time, each
under a CPU timer (`ITIMER_PROF`: the kernel kills the process with SIGPROF when a job's CPU time
runs out, even inside C code). A job that leaves processes running is a `processes` violation
(the worker is a child subreaper, so orphans of the job are its children). The worker must never import anyio or asyncio: they would load
`subprocess` before the hook is armed.
"""

from __future__ import annotations

# The `noqa: F401` modules are imported before confinement so that sandboxed code finds them
# loaded: a job's import then costs nothing and opens no file under the audit hook.
import base64  # noqa: F401
import bisect  # noqa: F401
import calendar  # noqa: F401
import collections  # noqa: F401
import copy  # noqa: F401
import csv  # noqa: F401
import dataclasses
import datetime  # noqa: F401
import decimal  # noqa: F401
import difflib  # noqa: F401
import enum  # noqa: F401
import fractions  # noqa: F401
import functools  # noqa: F401
import hashlib  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import json  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import os
import random  # noqa: F401
import re  # noqa: F401
import resource
import signal
import statistics  # noqa: F401
import string  # noqa: F401
import sys
import tempfile
import textwrap  # noqa: F401
import time
import typing  # noqa: F401
import unicodedata  # noqa: F401
import uuid  # noqa: F401
import zoneinfo  # noqa: F401
from typing import Any

from arena.sandbox import confine as confine_mod
from arena.sandbox import framing, guard, jobs, object_jobs
from arena.sandbox.models import classify_exit


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# Checks and programs run in a child forked per job: whatever they change in the interpreter
# (monkeypatched modules, globals) dies with the child, so one job can never tamper with the
# verification of the next. Tool calls run in the worker itself: a fork costs milliseconds and a
# tool call must cost less (their modules are imported once per worker and cached).
_FORKED = frozenset({"check", "program"})


def _dispatch(job: dict[str, Any], modules: jobs.ToolModules, backends: object_jobs.Backends) -> jobs.Reply:
    kind = job.get("kind")
    if kind == "tool":
        return jobs.run_tool(job, modules)
    if kind == "objects":
        return object_jobs.run_objects(job, backends)
    if kind == "check":
        return jobs.run_check(job)
    if kind == "program":
        return jobs.run_program(job, modules)
    if kind == "describe":
        return jobs.describe_tools(job, modules)
    return {"ok": False, "error": f"unknown job kind {kind!r}"}, []


def _execute(
    job: dict[str, Any], modules: jobs.ToolModules, tripped: Any, backends: object_jobs.Backends
) -> jobs.Reply:
    """Run one job under its CPU timer; a tripwire or MemoryError turns it into a violation."""
    signal.setitimer(signal.ITIMER_PROF, float(job["cpu_seconds"]))
    try:
        header, blobs = _dispatch(job, modules, backends)
    except MemoryError:
        header, blobs = {"violation": "memory", "detail": "ran out of its address-space limit"}, []
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    trip = tripped()
    if trip is not None and "violation" not in header:
        header, blobs = {"violation": trip[0], "detail": trip[1]}, []
    return header, blobs


def _execute_forked(
    job: dict[str, Any], modules: jobs.ToolModules, tripped: Any, backends: object_jobs.Backends
) -> jobs.Reply:
    """`_execute` in a fresh child; its reply comes back over a private pipe."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except BlockingIOError:
        os.close(r)
        os.close(w)
        return {"violation": "processes", "detail": "no process left to run the job in"}, []
    if pid == 0:
        os.close(r)
        me = os.getpid()
        os.register_at_fork(after_in_child=lambda: os.close(w))  # the job's own children stay mute
        header, blobs = _execute(job, modules, tripped, backends)
        if os.getpid() == me:
            try:
                framing.write_all(w, framing.encode_reply(header, blobs))
            except (TypeError, ValueError) as exc:
                framing.write_all(
                    w, framing.encode_reply({"ok": False, "error": f"reply is not JSON: {exc}"})
                )
        os._exit(0)
    os.close(w)
    try:
        header, blobs = framing.read_reply_fd(r)
    except (EOFError, framing.FrameError):
        header, blobs = {}, []
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    if not header:
        code = os.waitstatus_to_exitcode(status)
        kind, detail = classify_exit(code)
        header = {"violation": kind, "detail": f"the job's process {detail}"}
    return header, blobs


def _children_left() -> bool:
    """Reap finished children; True if some are still running (orphans come here: subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _serve(ipc_in: int, ipc_out: int, reset: Any, tripped: Any) -> None:
    modules = jobs.ToolModules()
    backends = object_jobs.Backends()
    main_pid = os.getpid()
    while True:
        try:
            job = framing.read_job(ipc_in)
        except EOFError:
            os._exit(0)
        reset()
        start = time.perf_counter()
        if job.get("kind") in _FORKED:
            header, blobs = _execute_forked(job, modules, tripped, backends)
        else:
            header, blobs = _execute(job, modules, tripped, backends)
        if os.getpid() != main_pid:
            os._exit(0)  # a child the job forked came back here: only the worker replies
        if "violation" not in header and _children_left():
            header, blobs = {"violation": "processes", "detail": "it left processes running"}, []
        header["cpu_s"] = _cpu_seconds()
        header["duration_us"] = (time.perf_counter() - start) * 1e6
        try:
            parts = framing.encode_reply(header, blobs)
        except (TypeError, ValueError) as exc:
            parts = framing.encode_reply({"ok": False, "error": f"reply is not JSON: {exc}", "cpu_s": 0}, [])
        framing.write_all(ipc_out, parts)


def main() -> None:
    """Entry point of the worker process."""
    # Only this package's own path is wanted: '' or '/' (cwd) would shadow modules in the sandbox.
    sys.path[:] = [p for p in sys.path if p not in ("", "/", os.getcwd())]
    ipc_in, ipc_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    setup: dict[str, Any] = framing.read_job(ipc_in)
    try:
        req = confine_mod.ConfineRequest(**setup["confine"])
        layers = confine_mod.confine(req)
        layers.readable = list(setup["readable"])
    except Exception as exc:
        framing.write_all(
            ipc_out, framing.encode_reply({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        )
        os._exit(1)
    # ctypes did its job; unloaded, any new import of it goes through the audit hook.
    for name in [n for n in sys.modules if n in ("ctypes", "_ctypes") or n.startswith("ctypes.")]:
        del sys.modules[name]
    sys.dont_write_bytecode = True
    # Later imports search only what the worker may read (PYTHONPATH's folder is not part of it).
    roots = tuple(layers.readable)
    sys.path[:] = [p for p in sys.path if any(p == r or p.startswith(r + "/") for r in roots)]
    sys.path_importer_cache.clear()
    os.environ.update({"TMPDIR": layers.work_dir, "HOME": layers.work_dir})
    tempfile.tempdir = layers.work_dir
    reset, tripped = guard.install(
        readable=layers.readable,
        writable=[layers.work_dir],
        ipc_fds=(ipc_in, ipc_out),
        audit=bool(setup.get("audit", True)),
    )
    ready = {"ready": True, "pid": os.getpid(), "layers": dataclasses.asdict(layers)}
    framing.write_all(ipc_out, framing.encode_reply(ready))
    _serve(ipc_in, ipc_out, reset, tripped)


if __name__ == "__main__":
    main()
