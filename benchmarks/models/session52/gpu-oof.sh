#!/bin/bash
# Session 52, one call on the GPU machine's host cores: every fold's out-of-fold model of both
# GPUs' shipped forest rows (margin_forest.py oof), six processes of one thread each, at most
# ${1:-520} s; the npz files and logs in $OUT/oof.tgz (the device tool brings back at most 8 files:
# the first call wrote them loose and lost five).
set -u
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
O=/tmp/oof; mkdir -p $O
(nproc --all; lscpu | grep "Model name"; python3 -c "import torch, numpy; print(torch.__version__, numpy.__version__)") > $O/host.txt
for key in NVIDIA-H200 NVIDIA-H100; do
  for f in 0 1 2; do
    timeout ${1:-520} python3 benchmarks/models/session52/margin_forest.py oof $key $f --out $O \
      > $O/log-$key-f$f.txt 2>&1 &
  done
done
wait
cat $O/host.txt $O/log-*.txt | grep -v Warning; tar czf $OUT/oof.tgz -C /tmp oof; ls -la $O $OUT
