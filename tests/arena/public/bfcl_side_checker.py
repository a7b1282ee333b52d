"""BFCL's own multi-turn checker on decoded trajectories, in a side environment of its own.

Run as `python -S bfcl_side_checker.py SIDE_DIR` (no site-packages: only the standard library
and SIDE_DIR, which holds `bfcl-eval --no-deps` and `mpmath`). Reads JSON lines `{"key", "id",
"decoded"}` on stdin and writes `{"key", "valid", "error_type", "irrelevance_valid", "crash"}`:
`valid`/`error_type` from `multi_turn_checker`, `irrelevance_valid` from
`multi_turn_irrelevance_checker`. Entries and ground truth come from the side install's own
data files, never from Arena's import. Each trajectory gets a model name of its own, because the
checker keeps the instances it builds in module globals keyed by model name and entry id.
"""

import json
import sys

sys.path.insert(0, sys.argv[1])

from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
    multi_turn_checker,
    multi_turn_irrelevance_checker,
)

DATA = sys.argv[1] + "/bfcl_eval/data/"
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


entries, truth = {}, {}
for cat in CATEGORIES:
    for row in _lines(DATA + f"BFCL_v4_multi_turn_{cat}.json"):
        entries[row["id"]] = row
    for row in _lines(DATA + f"possible_answer/BFCL_v4_multi_turn_{cat}.json"):
        truth[row["id"]] = row["ground_truth"]

for number, line in enumerate(sys.stdin):
    job = json.loads(line)
    entry, gt = entries[job["id"]], truth[job["id"]]
    out = {"key": job["key"]}
    try:
        result = multi_turn_checker(
            job["decoded"], gt, entry, job["id"].rsplit("_", 1)[0], f"arena_parity_{number}"
        )
        out["valid"] = bool(result["valid"])
        out["error_type"] = result.get("error_type")
        out["irrelevance_valid"] = bool(multi_turn_irrelevance_checker(job["decoded"], gt)["valid"])
    except Exception as exc:  # BFCL's checker raising is a finding to report, not a crash here
        out["crash"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out), flush=True)
