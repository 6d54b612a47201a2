#!/bin/bash
# Session 47's GPU call (nvidia-h200): scoring speed on the host's CPU for the three model files
# (the shipped ones and session 41's H200 file), then the handler check with the shipped
# (session 46) H200 file: speed (15 GEMMs, cold compiles) and correctness (every op).
# Run from the repository root; writes under $OUT. It writes up to 11 files there (10 in call 1) and
# the device returns at most 8: its speed.json and speed.log did not come back; gpu2.sh writes at
# most 6 (the scoring runs into one file) and does the rest.
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
D=packages/torch-diode-models/src/torch_diode_models
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"; lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-60; lscpu | grep -o -E "avx512[a-z_]*" | sort -u | tr '\n' ' '; echo; } > $OUT/gpu.txt 2>&1
for f in $D/NVIDIA-H200-matmul.safetensors $D/NVIDIA-H100-matmul.safetensors $SESSION41_H200; do
  n=$(basename $(dirname $f))-$(basename $f .safetensors)
  timeout 60 python3 scripts/bench_scoring.py --model $f --repeat 500 > $OUT/scoring-$n.json 2> $OUT/scoring-$n.err
done
timeout 330 python3 scripts/check_handler_gpu.py --model $D/NVIDIA-H200-matmul.safetensors --mode speed --output $OUT/speed.json > $OUT/speed.log 2>&1
echo "speed rc=$?" >> $OUT/gpu.txt
timeout ${CORR_S:-150} python3 scripts/check_handler_gpu.py --model $D/NVIDIA-H200-matmul.safetensors --mode correctness --output $OUT/corr.json > $OUT/corr.log 2>&1
echo "corr rc=$?" >> $OUT/gpu.txt
