#!/usr/bin/env bash
# Session 71, rule 5 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
D=benchmarks/handler/session71
date -u > "$OUT/env.txt"
timeout 150 python3 $D/compile_method.py harness $M "$OUT/harness.json" > "$OUT/harness.log" 2>&1
echo "harness exit $? $(date -u)" >> "$OUT/env.txt"
for case in 0:stock 0:default 1:stock 1:default; do
  d=$(mktemp -d)
  TORCHINDUCTOR_CACHE_DIR=$d/inductor TRITON_CACHE_DIR=$d/triton timeout 90 python3 $D/compile_method.py fresh $M \
      "$OUT/fresh-${case/:/-}.json" $case > "$OUT/fresh-${case/:/-}.log" 2>&1
  echo "fresh $case exit $? $(date -u)" >> "$OUT/env.txt"
done
