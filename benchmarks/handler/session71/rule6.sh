#!/usr/bin/env bash
# Session 71, rule 6 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
D=benchmarks/handler/session71
date -u > "$OUT/env.txt"
for case in llm_mlp_up:stock llm_mlp_up:default vit_b_mlp:stock vit_b_mlp:default odd_small:stock odd_small:default; do
  d=$(mktemp -d)
  TORCHINDUCTOR_CACHE_DIR=$d/inductor TRITON_CACHE_DIR=$d/triton timeout 60 python3 $D/compile_method.py fresh $M \
      "$OUT/fresh-${case/:/-}.json" $case > /dev/null 2>&1
  echo "fresh $case exit $? $(date -u)" >> "$OUT/env.txt"
done
