#!/usr/bin/env bash
# Session 70, rule 1 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
S=benchmarks/handler/session70/wrong_configs.py
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  which compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer
  date -u
} > "$OUT/env.txt" 2>&1
timeout 300 python3 $S cases "$OUT/cases.jsonl" --workers 8 > "$OUT/cases.log" 2>&1
echo "cases exit $? $(date -u)" >> "$OUT/env.txt"
mkdir -p /tmp/dump
for c in A-base A-mm B-base B-mm; do
  timeout 60 python3 $S dump $c /tmp/dump/$c >> "$OUT/dump.log" 2>&1
done
(cd /tmp/dump && find . -name '*.py' | xargs grep -l 'triton_tem' | tar czf "$OUT/kernels.tgz" -T -)
SAN=$(which compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
for tool in racecheck memcheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 100 $SAN --tool $tool --print-limit 20 python3 $S one A-base > "$OUT/san-$tool.log" 2>&1
  echo "sanitizer $tool exit $? $(date -u)" >> "$OUT/env.txt"
done
