#!/usr/bin/env bash
# Session 69, rule 4 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  date -u
} > "$OUT/env.txt" 2>&1
for mode in no-guard guard; do
  timeout 270 python3 benchmarks/handler/session69/smem_guard.py $mode "$OUT/smem-$mode.json" > "$OUT/smem-$mode.log" 2>&1
  echo "$mode exit $?" >> "$OUT/env.txt"
done
date -u >> "$OUT/env.txt"
