#!/usr/bin/env bash
# One GRPO round through a policy server, measured (trainer/gpu_check.py prints the JSON).
#
#   scripts/gpu-check.sh [--cpu] [--model DIR] [--lora] [--steps N] [--out FILE] [-- gpu_check args...]
#
# GPU (default): serves DIR with vLLM (the reload and runtime-LoRA endpoints on, loopback only)
#   from its own venv, $VLLM_VENV (default .venv-vllm): vLLM pins another torch than the trainer, so
#   the two cannot share one. A missing venv is created and vLLM installed into it, from
#   $VLLM_WHEELS (a folder of wheels, for machines without a package index) when set. Half the GPU
#   goes to vLLM, the rest to the trainer: DIR should be a small model (default Qwen/Qwen3-0.6B,
#   downloaded to var/models on first use; set --model to a folder on an offline machine).
# --cpu: the same round against `arena serve-model --allow-reload` on the embedded model (what the
#   test suite runs, so this script cannot rot unnoticed).
# The trainer runs from this repository's .venv (`make setup`). Exit status: the check's.
set -euo pipefail

cd "$(dirname "$0")/.."
PY=.venv/bin/python
CPU=0
MODEL=""
OUT=""
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu) CPU=1 ;;
    --model) MODEL="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --lora|--steps|--tasks|--group-size|--max-turns|--max-tokens|--learning-rate)
      if [[ "$1" == --lora ]]; then EXTRA+=("$1"); else EXTRA+=("$1" "$2"); shift; fi ;;
    --) shift; EXTRA+=("$@"); break ;;
    *) echo "gpu-check: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$PY" ]] || { echo "gpu-check: no $PY: run 'make setup' first" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/arena-gpu-check.XXXXXX")"
PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

if [[ $CPU == 1 ]]; then
  MODEL="${MODEL:-$("$PY" -c 'from simulate.embedded import ensure_embedded_model; print(ensure_embedded_model())')}"
  .venv/bin/arena serve-model --model "$MODEL" --name policy --port "$PORT" --allow-reload \
    > "$WORK/server.log" 2>&1 &
else
  command -v nvidia-smi > /dev/null || { echo "gpu-check: no nvidia-smi: use --cpu on a machine without a GPU" >&2; exit 2; }
  VLLM_VENV="${VLLM_VENV:-.venv-vllm}"
  if [[ ! -x "$VLLM_VENV/bin/vllm" ]]; then
    python3 -m venv "$VLLM_VENV"
    if [[ -n "${VLLM_WHEELS:-}" ]]; then
      "$VLLM_VENV/bin/pip" install -q --no-index --find-links "$VLLM_WHEELS" "vllm==0.33.*"
    else
      "$VLLM_VENV/bin/pip" install -q "vllm==0.33.*"
    fi
  fi
  if [[ -z "$MODEL" ]]; then
    MODEL=var/models/Qwen3-0.6B
    [[ -f "$MODEL/config.json" ]] || "$VLLM_VENV/bin/hf" download Qwen/Qwen3-0.6B --local-dir "$MODEL"
  fi
  VLLM_SERVER_DEV_MODE=1 VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "$VLLM_VENV/bin/vllm" serve "$MODEL" \
    --served-model-name policy --host 127.0.0.1 --port "$PORT" --gpu-memory-utilization 0.45 \
    --enable-lora --max-lora-rank 16 --max-model-len 8192 --logprobs-mode processed_logprobs \
    --generation-config vllm > "$WORK/server.log" 2>&1 &
fi
SERVER_PID=$!

# The server is up when it lists its models (vLLM loads for minutes on a cold GPU).
for _ in $(seq 1 900); do
  if "$PY" -c "import httpx, sys; sys.exit(httpx.get('http://127.0.0.1:$PORT/v1/models', timeout=2).status_code != 200)" 2>/dev/null; then
    break
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "gpu-check: the policy server exited:" >&2; tail -20 "$WORK/server.log" >&2; exit 1; }
  sleep 1
done

ARGS=(--base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL" --work "$WORK" "${EXTRA[@]}")
[[ -n "$OUT" ]] && ARGS+=(--out "$OUT")
"$PY" -m trainer.gpu_check "${ARGS[@]}"
