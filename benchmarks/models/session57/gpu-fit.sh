#!/bin/bash
# Session 57: forest fits on the GPU machine's host CPUs (no GPU work), one process per
# (GPU key, variant, seed), each on one thread; forests and logs packed into $OUT/forests.tgz.
#   bash gpu-fit.sh xfer   # first call: H100 forests from the shipped H200 forest with 48 and 144
#                          # new trees, H200 forests from the shipped H100 forest with 96 (347 s)
#   bash gpu-fit.sh self   # second call, the controls: each GPU's own forest of seeds 0-4 and 96
#                          # more of its own trees (339 s; its archive was named forests2.tgz)
#   bash gpu-fit.sh plus   # fourth call: H200 forests of 192 trees on 3,490 of its problems
#                          # (its training files and train-active3, train-cover2), three threads each
# DEADLINE bounds each fit (a fit cut by it writes nothing).
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
DEADLINE=${DEADLINE:-540}
mkdir -p "$OUT/f"
run() {
  OMP_NUM_THREADS="${THREADS:-1}" MKL_NUM_THREADS="${THREADS:-1}" timeout "$DEADLINE" \
    python3 benchmarks/models/session57/forest_xfer.py fit "$2" --key "$1" --seeds "$3" \
    --threads "${THREADS:-1}" --out "$OUT/f" "${@:4}" > "$OUT/f/log-$1-$2-s$3.txt" 2>&1 &
}
for s in 0 1 2 3 4; do
  case "${1:-xfer}" in
    xfer) run NVIDIA-H100 xfer48 "$s"; run NVIDIA-H100 xfer144 "$s"; run NVIDIA-H200 xfer96 "$s" ;;
    self) run NVIDIA-H100 self96 "$s"; run NVIDIA-H200 self96 "$s" ;;
    plus) THREADS=3 run NVIDIA-H200 plus "$s" --add data/NVIDIA-H200/train-active3.msgpack data/NVIDIA-H200/train-cover2.msgpack ;;
    *) echo "usage: gpu-fit.sh xfer|self|plus" >&2; exit 2 ;;
  esac
done
wait
cat "$OUT"/f/log-*.txt
tar czf "$OUT/forests.tgz" -C "$OUT" f && rm -rf "$OUT/f"
