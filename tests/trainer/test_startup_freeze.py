"""`trainer.memory.freeze_startup_heap`: start-up objects leave the full collections, later garbage
does not, and it happens once per process (in a fresh interpreter: freezing is process-wide)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc, weakref
from trainer.memory import freeze_startup_heap

class Node:
    pass

kept = Node(); kept.me = kept            # alive at start-up: frozen
freeze_startup_heap()
frozen = gc.get_freeze_count()
assert frozen > 0, frozen

later = Node(); later.me = later          # cyclic garbage made after the freeze
probe = weakref.ref(later)
del later
gc.collect()
assert probe() is None, "garbage made after the freeze was not collected"

freeze_startup_heap()                     # a second daemon in the same process
assert gc.get_freeze_count() == frozen, (gc.get_freeze_count(), frozen)
print("ok")
"""


def test_startup_freeze_keeps_later_garbage_collectable_and_runs_once() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "ok"
