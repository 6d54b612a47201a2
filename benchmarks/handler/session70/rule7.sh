#!/usr/bin/env bash
# Session 70, rule 7 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
export WRONG_CONFIGS_NO_PAD=1
S=benchmarks/handler/session70/wrong_configs.py
date -u > "$OUT/env.txt"
timeout 430 python3 $S cases "$OUT/sample.jsonl" --from benchmarks/handler/session70/sample-cases.json --workers 12 > "$OUT/sample.log" 2>&1
echo "sample exit $? $(date -u)" >> "$OUT/env.txt"
