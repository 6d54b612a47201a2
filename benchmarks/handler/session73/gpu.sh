#!/usr/bin/env bash
# Session 73's GPU calls (PLAN.md), on the GPU machine from the repository root; results under $OUT.
#   COLLECT=6 DEMO=1 VS_NEW_S=250 bash benchmarks/handler/session73/gpu.sh
# COLLECT=N: the collector's speed, new then old or VARIANTS (benchmarks/collect/session73/collect_speed.py), N
# problems or those at indices PICK;
# DEMO=1: diode demo; VS_NEW_S=S: vs_new.py (new processes) on session 63's sample for S seconds
# (resuming $VS_NEW_FROM when given); ONE_S=S: changed.py time (one process) for S seconds;
# POOL=p1,p2: pool_ready.py on those speed-check problems (run first).
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
S=benchmarks/handler/session63/sample-H200.json
TAG=${TAG:-a}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, triton, platform; print(torch.__version__, triton.__version__, torch.version.cuda, platform.python_version())'
  nproc; } > "$OUT/env-$TAG.txt" 2>&1
if [ -n "${POOL:-}" ]; then  # first: the worker-pool hypothesis (pool_ready.py)
  timeout "${POOL_S:-500}" python3 benchmarks/handler/session73/pool_ready.py "$OUT/pool.json" "$POOL" > "$OUT/pool.log" 2>&1
  echo "pool rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
if [ -n "${COLLECT:-}" ]; then
  for v in ${VARIANTS:-new old}; do
    timeout "${COLLECT_S:-150}" python3 benchmarks/collect/session73/collect_speed.py $v "$COLLECT" "${SPACE:-DEFAULT}" \
        "$OUT/collect-$v.json" ${PICK:-} > "$OUT/collect-$v.log" 2>&1
    echo "collect $v rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
  done
fi
if [ "${DEMO:-0}" = 1 ]; then
  timeout "${DEMO_S:-150}" python3 -m torch_diode demo --model $M --plot-dir /tmp/demo-plots > "$OUT/demo.log" 2>&1
  echo "demo rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
if [ -n "${VS_NEW_S:-}" ]; then
  [ -n "${VS_NEW_FROM:-}" ] && cp "$VS_NEW_FROM" "$OUT/vs-new.json"
  timeout $((VS_NEW_S + 90)) python3 benchmarks/handler/session73/vs_new.py $S $M "$OUT/vs-new.json" \
      --order stock,default --budget "$VS_NEW_S" > "$OUT/vs-new-$TAG.log" 2>&1
  echo "vs-new rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
if [ -n "${ONE_S:-}" ]; then
  timeout $((ONE_S + 60)) python3 benchmarks/handler/session63/changed.py time $S $M "$OUT/vs-one.json" \
      --order stock,default --budget "$ONE_S" > "$OUT/vs-one.log" 2>&1
  echo "vs-one rc=$? $(date -u)" >> "$OUT/env-$TAG.txt"
fi
