#!/usr/bin/env bash
# Session 69, rule 1 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  date -u
} > "$OUT/env.txt" 2>&1
# 1. the H200 file on its GPU: dynamic-shape correctness, then dynamic-M speed against stock
timeout 420 python3 scripts/check_handler_gpu.py --model NVIDIA-H200-matmul --mode dynamic \
  --output "$OUT/dynamic-H200.json" > "$OUT/dynamic-H200.log" 2>&1
echo "H200 file exit $?" >> "$OUT/env.txt"
# 2. the H100 file, correctness only (no speed problem selected)
timeout 150 python3 scripts/check_handler_gpu.py --model NVIDIA-H100-matmul --mode dynamic --problems odd_mm \
  --output "$OUT/dynamic-H100-file.json" > "$OUT/dynamic-H100-file.log" 2>&1
echo "H100 file exit $?" >> "$OUT/env.txt"
date -u >> "$OUT/env.txt"
