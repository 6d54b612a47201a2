#!/usr/bin/env bash
# Session 70, rule 4 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
S=benchmarks/handler/session70/wrong_configs.py
date -u > "$OUT/env.txt"
# 1. ten fresh compiles each of A and C, every stage Triton writes kept
for c in A-base C-base; do
  for i in 1 2 3 4 5 6 7 8 9 10; do
    timeout 120 python3 $S repeat $c /tmp/rep/$c-$i >> "$OUT/repeat.jsonl" 2>> "$OUT/repeat.err" &
  done
  wait
done
echo "repeats done $(date -u)" >> "$OUT/env.txt"
# 2. six compiles of A in turn with address randomisation off and one cache path, in-process compile
for i in 1 2 3 4 5 6; do
  rm -rf /tmp/norand
  TORCHINDUCTOR_COMPILE_THREADS=1 timeout 120 setarch x86_64 -R python3 $S repeat A-base /tmp/norand >> "$OUT/norand.jsonl" 2>> "$OUT/norand.err"
  find /tmp/norand -name 'triton_tem*.ttgir' -o -name 'triton_tem*.llir' -o -name 'triton_tem*.ptx' | sort | xargs sha256sum | sed "s|/tmp/norand/[^/]*/|run$i |" >> "$OUT/norand-hashes.txt"
done
echo "norand done $(date -u)" >> "$OUT/env.txt"
find /tmp/rep -name 'triton_tem*.cubin' | while read f; do /usr/local/cuda/bin/cuobjdump --dump-sass "$f" > "$f.sass" 2>&1; done
(cd /tmp/rep && find . -type f \( -name 'triton_tem*.sass' -o -name 'triton_tem*.ttgir' -o -name 'triton_tem*.ttir' -o -name 'triton_tem*.llir' -o -name 'triton_tem*.ptx' \) | tar czf "$OUT/stages.tgz" -T -)
date -u >> "$OUT/env.txt"
