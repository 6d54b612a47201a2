#!/bin/bash
# Session 52, one call on the GPU machine's host cores: margin forests (margin_forest.py fit) of
# both GPUs (or those of $KEYS), one process of one thread per (TAU, SEED) pair given as
# arguments (e.g. 0.05:0 0.1:1), at most 540 s; the forests and logs in $OUT/fit.tgz.
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
O=/tmp/fit; mkdir -p $O
for key in ${KEYS:-NVIDIA-H200 NVIDIA-H100}; do
  for ts in "$@"; do
    timeout 540 python3 benchmarks/models/session52/margin_forest.py fit $key ${ts%:*} --seeds ${ts#*:} \
      > $O/log-$key-$ts.txt 2>&1 &
  done
done
wait
cp benchmarks/models/session52/forests/margin-*.npz $O/ 2>/dev/null
cat $O/log-*.txt | grep -v Warning; tar czf $OUT/fit.tgz -C /tmp fit; ls -la $O $OUT
