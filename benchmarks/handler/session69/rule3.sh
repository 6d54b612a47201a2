#!/usr/bin/env bash
# Session 69, rule 3 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  date -u
} > "$OUT/env.txt" 2>&1
for key in H200 H100; do
  timeout 270 python3 scripts/check_handler_gpu.py --model NVIDIA-$key-matmul --mode training \
    --output "$OUT/training-$key-file.json" > "$OUT/training-$key-file.log" 2>&1
  echo "$key file exit $?" >> "$OUT/env.txt"
done
date -u >> "$OUT/env.txt"
