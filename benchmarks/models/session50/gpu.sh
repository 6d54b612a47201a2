#!/bin/bash
# Session 50's GPU call (nvidia-h200): retime.py's lists timed twice (runs A and B, resumable:
# copy a partial output back to $RESUME_DIR and call again), then, in what is left of LIMIT
# seconds, the handler's correctness cases CORR_OPS with the shipped H200 file.
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
D=packages/torch-diode-models/src/torch_diode_models
L=${LISTS:-benchmarks/models/session50/lists-NVIDIA-H200.json.gz}
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton, sys; print(torch.__version__, triton.__version__, torch.version.cuda, sys.version.split()[0])"; } > $OUT/gpu.txt 2>&1
for run in ${RUNS:-a b}; do
  [ -n "${RESUME_DIR:-}" ] && [ -f $RESUME_DIR/retime-$run.msgpack ] && cp $RESUME_DIR/retime-$run.msgpack $OUT/
  timeout ${RUN_S:-270} python3 benchmarks/models/session44/active.py run $L $OUT/retime-$run.msgpack --hardware NVIDIA-H200 --budget ${BUDGET_S:-220} > $OUT/retime-$run.log 2>&1
  echo "run $run rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/gpu.txt
done
LEFT=$(( ${LIMIT:-580} - ($(date +%s) - T0) ))
if [ -n "${CORR_OPS:-}" ] && [ $LEFT -gt 60 ]; then
  timeout $LEFT python3 scripts/check_handler_gpu.py --model $D/NVIDIA-H200-matmul.safetensors --mode correctness --ops $CORR_OPS --output $OUT/corr.json > $OUT/corr.log 2>&1
  echo "corr rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/gpu.txt
fi
