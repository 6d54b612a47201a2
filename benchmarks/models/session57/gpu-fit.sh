#!/bin/bash
# Session 57: forest-transfer fits on the GPU machine's host CPUs (no GPU work), one process per
# (GPU key, variant, seed), each on one thread: H100 forests from the shipped H200 forest with 48
# and 144 new trees, H200 forests from the shipped H100 forest with 96. Forests and logs are
# packed into $OUT/forests.tgz. DEADLINE bounds each fit (a fit cut by it writes nothing).
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
DEADLINE=${DEADLINE:-540}
mkdir -p "$OUT/f"
run() {
  timeout "$DEADLINE" python3 benchmarks/models/session57/forest_xfer.py fit "$2" --key "$1" --seeds "$3" \
    --threads 1 --out "$OUT/f" > "$OUT/f/log-$1-$2-s$3.txt" 2>&1 &
}
for s in 0 1 2 3 4; do
  run NVIDIA-H100 xfer48 "$s"
  run NVIDIA-H100 xfer144 "$s"
  run NVIDIA-H200 xfer96 "$s"
done
wait
nproc; python3 -c "import torch, numpy; print(torch.__version__, numpy.__version__)"
cat "$OUT"/f/log-*.txt
tar czf "$OUT/forests.tgz" -C "$OUT" f && rm -rf "$OUT/f"
