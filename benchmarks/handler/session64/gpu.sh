#!/bin/bash
# Session 64's GPU calls, PLAN rule 3, the shipped H200 file; everything under $OUT (gpu.txt: the
# machine and versions):
#   STAGE=speed (nvidia-h200):   the speed check, each GEMM compiled cold by stock, the handler's
#                                defaults as they were (one_below_us off: the default when this ran, 20
#                                since, so it is passed as 0) and the variant one20, alone on the machine;
#   STAGE=corr-changed (nvidia-h200-x2): GPU 0 the correctness cases with one_below_us=20; GPU 1 the
#                                validation problems whose kept set one20 changes (one20-list-H200.json),
#                                each compiled cold default, one20, default, one20.
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
D=benchmarks/handler/session64
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton, sys; print(torch.__version__, triton.__version__, torch.version.cuda, sys.version.split()[0])"; nproc; } > $OUT/gpu.txt 2>&1
case "${STAGE:?STAGE=speed or corr-changed}" in
  speed)
    timeout ${LIMIT_S:-560} python3 scripts/check_handler_gpu.py --model $M --mode speed --one-below-us 0 \
        --variant 'one20={"one_below_us": 20}' --output $OUT/speed.json > $OUT/speed.log 2>&1
    echo "speed rc=$?" >> $OUT/gpu.txt ;;
  corr-changed)
    CUDA_VISIBLE_DEVICES=0 timeout ${LIMIT_S:-560} python3 scripts/check_handler_gpu.py --model $M --mode correctness \
        --one-below-us 20 --output $OUT/corr.json > $OUT/corr.log 2>&1 &
    CUDA_VISIBLE_DEVICES=1 timeout ${LIMIT_S:-560} python3 $D/changed64.py time $D/one20-list-H200.json $M \
        $OUT/changed.json --order default,one20,default,one20 --budget ${BUDGET_S:-450} > $OUT/changed.log 2>&1 &
    wait
    echo "corr-changed done" >> $OUT/gpu.txt ;;
esac
