#!/bin/bash
# Session 47's second GPU call (nvidia-h200): scoring speed and its parts on the host's CPU, then
# the correctness cases the first call's 200 s did not reach (CORR_OPS, the shipped file), then the
# handler's speed check with MODEL (default: the shipped, session 46, H200 file). At most 8 files
# under $OUT. Calls: SCORING=1 CORR_OPS=baddbmm,linear (cut in nn.Linear); CORR_OPS=linear
# MODEL=<session 41's H200 file> (the same speed check with the file it replaced).
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
D=packages/torch-diode-models/src/torch_diode_models
M=${MODEL:-$D/NVIDIA-H200-matmul.safetensors}
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"; } > $OUT/gpu.txt 2>&1
if [ -n "${SCORING:-}" ]; then
  for r in 1 2; do for f in $D/NVIDIA-H200-matmul.safetensors $D/NVIDIA-H100-matmul.safetensors $SESSION41_H200; do
    echo "== round $r $f" >> $OUT/scoring.txt
    timeout 60 python3 scripts/bench_scoring.py --model $f --repeat 500 >> $OUT/scoring.txt 2>&1
  done; done
  for f in $D/NVIDIA-H200-matmul.safetensors $D/NVIDIA-H100-matmul.safetensors; do
    echo "== parts $f" >> $OUT/scoring.txt
    timeout 60 python3 benchmarks/handler/session47/parts.py $f >> $OUT/scoring.txt 2>&1
  done
fi
if [ -n "${CORR_OPS:-}" ]; then  # always the shipped file
  timeout ${CORR_S:-170} python3 scripts/check_handler_gpu.py --model $D/NVIDIA-H200-matmul.safetensors --mode correctness --ops $CORR_OPS --output $OUT/corr.json > $OUT/corr.log 2>&1
  echo "corr rc=$?" >> $OUT/gpu.txt
fi
timeout ${SPEED_S:-330} python3 scripts/check_handler_gpu.py --model $M --mode speed --output $OUT/speed.json > $OUT/speed.log 2>&1
echo "speed rc=$?" >> $OUT/gpu.txt
