#!/usr/bin/env bash
# Session 70, rule 6 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONUNBUFFERED=1
R=benchmarks/handler/session70/repro_triton.py
date -u > "$OUT/env.txt"
for v in "default X=1" "llvm-O0 DISABLE_LLVM_OPT=1" "ptxas-O0 DISABLE_PTXAS_OPT=1"; do
  set -- $v
  name=$1; shift
  env "$@" TRITON_CACHE_DIR=/tmp/tc-$name timeout 150 python3 $R > "$OUT/repro-$name.jsonl" 2> "$OUT/repro-$name.err"
  echo "$name exit $? $(date -u)" >> "$OUT/env.txt"
done
