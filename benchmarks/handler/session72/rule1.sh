#!/usr/bin/env bash
# Session 72, rules 1-2 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
#   PROBLEMS=a,b,c DEMO=1 bash benchmarks/handler/session72/rule1.sh
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
TAG=${TAG:-a}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, triton, platform; print(torch.__version__, triton.__version__, torch.version.cuda, platform.python_version())'
  nproc; } > "$OUT/env-$TAG.txt" 2>&1
if [ -n "${PROBLEMS:-}" ]; then
  timeout "${SPEED_S:-420}" python3 scripts/check_handler_gpu.py --model $M --mode speed --problems "$PROBLEMS" \
      --output "$OUT/speed-$TAG.json" > "$OUT/speed-$TAG.log" 2>&1
  echo "speed rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
if [ "${DEMO:-0}" = 1 ]; then
  timeout "${DEMO_S:-110}" python3 -m torch_diode demo --model $M --plot-dir /tmp/demo-plots > "$OUT/demo.log" 2>&1
  echo "demo rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
if [ "${DYNAMIC:-0}" = 1 ]; then
  timeout "${DYNAMIC_S:-330}" python3 scripts/check_handler_gpu.py --model $M --mode dynamic --ops none \
      --output "$OUT/dynamic.json" > "$OUT/dynamic.log" 2>&1
  echo "dynamic rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
if [ -n "${TESTS:-}" ]; then
  timeout "${TESTS_S:-200}" bash scripts/run_gpu_tests.sh $TESTS > /dev/null 2>&1
  echo "tests rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
