#!/usr/bin/env bash
# Session 71, rules 1 and 2 (PLAN.md; rule 2: SKIP_CORR=1 ORDER=default,warps4 TIME_S=480 BUDGET_S=420
# LIST=benchmarks/handler/session71/warps4-list-H200-rest.json): on the GPU machine, from the repository root; results under $OUT.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src PYTHONUNBUFFERED=1
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
D=benchmarks/handler/session71
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton, sys; print(torch.__version__, triton.__version__, torch.version.cuda, sys.version.split()[0])"; } > "$OUT/env.txt" 2>&1
if [ -z "${SKIP_CORR:-}" ]; then
  timeout 200 python3 scripts/check_handler_gpu.py --model $M --mode correctness --min-num-warps 4 \
      --output "$OUT/corr-warps4.json" > "$OUT/corr-warps4.log" 2>&1
  echo "corr exit $? $(date -u)" >> "$OUT/env.txt"
fi
timeout ${TIME_S:-370} python3 $D/changed71.py time ${LIST:-$D/warps4-list-H200.json} $M "$OUT/changed.json" \
    --order ${ORDER:-default,warps4,default,warps4} --budget ${BUDGET_S:-330} > "$OUT/changed.log" 2>&1
echo "changed exit $? $(date -u)" >> "$OUT/env.txt"
