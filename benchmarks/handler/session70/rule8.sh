#!/usr/bin/env bash
# Session 70, rule 8 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
date -u > "$OUT/env.txt"
timeout 300 python3 benchmarks/handler/session70/lut_guard.py run benchmarks/handler/session70/lut-over-smem.json "$OUT/lut-guard.json" > "$OUT/lut-guard.log" 2>&1
echo "exit $? $(date -u)" >> "$OUT/env.txt"
