#!/bin/bash
# Session 54's GPU call (nvidia-h200): the model files with a screening network (two-width cascade).
# 1. scoring time on the host's CPUs (session48/pinned.py: 1,500 candidates, one process pinned to
#    each CPU in turn), the new H200 file against the one it replaces (OLD=<folder with the old
#    file>), interleaved in ROUNDS rounds;
# 2. the handler's correctness cases with the new H200 file, every op (CORR_S seconds);
# 3. the handler's speed check with it (SPEED_S seconds). A stage given 0 seconds is skipped. At most
#    8 files under $OUT. Calls: OLD=benchmarks/handler/session54/old CORR_S=420 SPEED_S=0; CORR_S=0 SPEED_S=450.
# Session 61: ARGS, more check_handler_gpu.py flags for both checks (e.g. --aten-alone-when-best).
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
D=packages/torch-diode-models/src/torch_diode_models
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda)"; nproc; } > $OUT/gpu.txt 2>&1
if [ -n "${OLD:-}" ]; then
  timeout 200 python3 benchmarks/models/session48/pinned.py --model old=$OLD/NVIDIA-H200-matmul.safetensors \
      --model new=$D/NVIDIA-H200-matmul.safetensors --shortlist 128 --rounds ${ROUNDS:-300} --cpus 0-15 \
      --output $OUT/pinned.json > $OUT/pinned.log 2>&1
  echo "pinned rc=$?" >> $OUT/gpu.txt
fi
if [ "${CORR_S:-200}" != 0 ]; then
  timeout ${CORR_S:-200} python3 scripts/check_handler_gpu.py --model $D/NVIDIA-H200-matmul.safetensors --mode correctness ${ARGS:-} --output $OUT/corr.json > $OUT/corr.log 2>&1
  echo "corr rc=$?" >> $OUT/gpu.txt
fi
if [ "${SPEED_S:-300}" != 0 ]; then
  timeout ${SPEED_S:-300} python3 scripts/check_handler_gpu.py --model $D/NVIDIA-H200-matmul.safetensors --mode speed ${ARGS:-} --output $OUT/speed.json > $OUT/speed.log 2>&1
  echo "speed rc=$?" >> $OUT/gpu.txt
fi
