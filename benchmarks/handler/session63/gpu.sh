#!/bin/bash
# Session 63's GPU calls (nvidia-h200), rule 1 of session63/PLAN.md, the shipped H200 file:
#   STAGE=speed: the speed check, each GEMM compiled cold by stock, "diode" (aten_alone_below_us off:
#                the default when this ran; 50 since, so it is passed as 0), "short"
#                (aten_alone_below_us=50) and "on" (aten_alone_when_best) in the same run;
#   STAGE=corr:  the correctness cases with aten_alone_below_us=50;
#   STAGE=vs-stock: rule 3, below.
# Everything under $OUT (gpu.txt: the machine and versions).
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
M=packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton, sys; print(torch.__version__, triton.__version__, torch.version.cuda, sys.version.split()[0])"; nproc; } > $OUT/gpu.txt 2>&1
case "${STAGE:?STAGE=speed, corr or vs-stock}" in
  speed)
    timeout ${LIMIT_S:-560} python3 scripts/check_handler_gpu.py --model $M --mode speed --aten-alone-below-us 0 \
        --variant 'short={"aten_alone_below_us": 50}' --variant 'on={"aten_alone_when_best": true}' \
        --output $OUT/speed.json > $OUT/speed.log 2>&1
    echo "speed rc=$?" >> $OUT/gpu.txt ;;
  corr)
    timeout ${LIMIT_S:-560} python3 scripts/check_handler_gpu.py --model $M --mode correctness \
        --aten-alone-below-us 50 --output $OUT/corr.json > $OUT/corr.log 2>&1
    echo "corr rc=$?" >> $OUT/gpu.txt ;;
  vs-stock)  # rule 3 (nvidia-h200-x2): stock and the handler's defaults on sample-H200.json, one process per GPU
    for i in 0 1; do
      CUDA_VISIBLE_DEVICES=$i timeout ${LIMIT_S:-560} python3 benchmarks/handler/session63/changed.py time \
          benchmarks/handler/session63/sample-H200.json $M $OUT/vs-stock-$i.json --order stock,default \
          --shard $i/2 --budget ${BUDGET_S:-420} > $OUT/vs-stock-$i.log 2>&1 &
    done
    wait
    echo "vs-stock done" >> $OUT/gpu.txt ;;
esac
