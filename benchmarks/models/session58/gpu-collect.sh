#!/bin/bash
# Session 58: the skinny H200 problems (skinny.py select ... --parts 2), one collector per GPU of an
# nvidia-h200-x2 machine, 15 compile processes each; resumes from the parts collected by earlier
# calls (data/NVIDIA-H200/$NAME-PART.msgpack, copied into $OUT first, appended to there).
# Session 59: L (the lists' prefix) and NAME (the data files' name) for its lists.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
BUDGET=${BUDGET:-470}
L=${L:-benchmarks/models/session58/lists-NVIDIA-H200}
NAME=${NAME:-train-skinny}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc
  python3 -c "import sys, torch, triton, numpy; print(sys.version.split()[0], torch.__version__, triton.__version__, numpy.__version__)"; } > "$OUT/gpu.txt" 2>&1
for i in 0 1; do
  f=data/NVIDIA-H200/$NAME-part$i.msgpack
  [ -f "$f" ] && cp "$f" "$OUT/"
  CUDA_VISIBLE_DEVICES=$i timeout $((BUDGET + 100)) python3 benchmarks/models/session44/active.py run "$L-$i.json.gz" \
    "$OUT/$NAME-part$i.msgpack" --hardware NVIDIA-H200 --budget "$BUDGET" --workers 15 > "$OUT/run-part$i.log" 2>&1 &
done
wait
ls -la "$OUT"
