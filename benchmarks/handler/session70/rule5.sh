#!/usr/bin/env bash
# Session 70, rule 5 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
export WRONG_CONFIGS_NO_PAD=1
S=benchmarks/handler/session70/wrong_configs.py
date -u > "$OUT/env.txt"
timeout 200 python3 $S cases "$OUT/cases-nopad.jsonl" --workers 8 > "$OUT/cases-nopad.log" 2>&1
echo "cases exit $? $(date -u)" >> "$OUT/env.txt"
ONLY=A-base,A-mm,A-s1,B-base,B-mm,C-base,C-s3,C-mm
for v in "bundled X=1" "system-ptxas TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas" "ptxas-O0 DISABLE_PTXAS_OPT=1" "llvm-O0 DISABLE_LLVM_OPT=1"; do
  set -- $v
  name=$1; shift
  env "$@" timeout 120 python3 $S cases "$OUT/variants.jsonl.$name" --workers 8 --only $ONLY > /dev/null 2>> "$OUT/variants.err"
  echo "variant $name ($*) exit $? $(date -u)" >> "$OUT/env.txt"
  sed "s/^{/{\"variant\": \"$name\", /" "$OUT/variants.jsonl.$name" >> "$OUT/variants.jsonl" && rm "$OUT/variants.jsonl.$name"
done
