#!/usr/bin/env bash
# Session 71, rule 4 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
date -u > "$OUT/env.txt"
timeout 120 python3 benchmarks/handler/session71/tiny_check.py $M "$OUT/tiny.json" > "$OUT/tiny.log" 2>&1
echo "tiny exit $? $(date -u)" >> "$OUT/env.txt"
timeout 200 python3 scripts/check_handler_gpu.py --model $M --mode dynamic --ops mm,addmm,bmm,baddbmm,linear \
    --problems odd_small --min-num-warps 4 --output "$OUT/dynamic-warps4.json" > "$OUT/dynamic-warps4.log" 2>&1
echo "dynamic exit $? $(date -u)" >> "$OUT/env.txt"
timeout 200 python3 scripts/check_handler_gpu.py --model $M --mode fusion --min-num-warps 4 \
    --output "$OUT/fusion-warps4.json" > "$OUT/fusion-warps4.log" 2>&1
echo "fusion exit $? $(date -u)" >> "$OUT/env.txt"
