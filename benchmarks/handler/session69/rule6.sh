#!/usr/bin/env bash
# Session 69, rule 6 (PLAN.md): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  date -u
} > "$OUT/env.txt" 2>&1
for key in H200 H100; do
  timeout 170 python3 scripts/check_handler_gpu.py --model NVIDIA-$key-matmul --mode dynamic --problems odd_mm \
    --output "$OUT/dynamic-$key-file.json" > "$OUT/dynamic-$key-file.log" 2>&1
  echo "$key file exit $?" >> "$OUT/env.txt"
done
timeout 100 python3 benchmarks/handler/session69/smem_guard.py guard "$OUT/smem-guard.json" > "$OUT/smem-guard.log" 2>&1
echo "guard exit $?" >> "$OUT/env.txt"
date -u >> "$OUT/env.txt"
