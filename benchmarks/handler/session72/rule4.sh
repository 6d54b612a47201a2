#!/usr/bin/env bash
# Session 72, rule 4 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
date -u > "$OUT/env-d.txt"
for v in plain shutdown; do
  timeout 85 python3 benchmarks/handler/session72/cause.py $v $M "$OUT/cause-$v.json" > "$OUT/cause-$v.log" 2>&1
  echo "$v rc=$? $(date -u)" >> "$OUT/env-d.txt"
done
