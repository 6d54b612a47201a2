#!/usr/bin/env bash
# Session 70, rule 3 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
S=benchmarks/handler/session70/wrong_configs.py
date -u > "$OUT/env.txt"
# 1. six fresh compiles of each wrong base, each in its own process: cubin hash, then calls
for c in A-base C-base B-base; do
  for i in 1 2 3 4 5 6; do
    timeout 120 python3 $S repeat $c /tmp/rep/$c-$i >> "$OUT/repeat.jsonl" 2>> "$OUT/repeat.err" &
  done
  wait
  echo "repeat $c done $(date -u)" >> "$OUT/env.txt"
done
# 2. sanitizers on base A with warm caches (compiled once outside, in-process compile)
export TORCHINDUCTOR_CACHE_DIR=/tmp/san-ic TRITON_CACHE_DIR=/tmp/san-tc TORCHINDUCTOR_COMPILE_THREADS=1
timeout 120 python3 $S warm A-base > "$OUT/san-warmup.log" 2>&1
SAN=/usr/local/cuda/bin/compute-sanitizer
for tool in racecheck synccheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 $SAN --tool $tool --print-limit 30 python3 $S warm A-base > "$OUT/san-$tool.log" 2>&1
  echo "sanitizer $tool exit $? $(date -u)" >> "$OUT/env.txt"
done
