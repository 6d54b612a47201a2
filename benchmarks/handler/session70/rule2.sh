#!/usr/bin/env bash
# Session 70, rule 2 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
S=benchmarks/handler/session70/wrong_configs.py
BUNDLED=$(python3 -c "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin', 'ptxas'))")
{
  date -u
  echo "bundled: $BUNDLED"; $BUNDLED --version | tail -2
  echo "system: $(which ptxas || echo /usr/local/cuda/bin/ptxas)"; /usr/local/cuda/bin/ptxas --version | tail -2
  python3 -c "import triton; k=triton.knobs.nvidia; print('knobs', [n for n in dir(k) if 'ptxas' in n or 'opt' in n])" 2>&1
} > "$OUT/env.txt" 2>&1
ONLY=A-base,A-mm,A-s1,B-base,B-mm,C-base,C-s3,C-mm
run() {  # name, env...
  local name=$1; shift
  env "$@" timeout 150 python3 $S cases "$OUT/v-$name.jsonl" --workers 8 --only $ONLY > "$OUT/v-$name.log" 2>&1
  echo "variant $name ($*) exit $? $(date -u)" >> "$OUT/env.txt"
}
run bundled X=1
run system-ptxas TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas
run ptxas-O0 DISABLE_PTXAS_OPT=1
run llvm-O0 DISABLE_LLVM_OPT=1
mkdir -p /tmp/dump
for c in A-base A-mm C-base C-s3; do
  timeout 90 python3 $S dump $c /tmp/dump/$c >> "$OUT/dump.log" 2>&1
done
find /tmp/dump -name '*.cubin' | while read f; do /usr/local/cuda/bin/cuobjdump --dump-sass "$f" > "$f.sass" 2>&1; done
(cd /tmp/dump && find . -type f \( -name '*.sass' -o -name '*.py' -o -name '*.ttir' -o -name '*.ttgir' -o -name '*.llir' -o -name '*.ptx' -o -name '*.json' \) | tar czf "$OUT/kernels.tgz" -T -)
date -u >> "$OUT/env.txt"
