#!/bin/bash
# Training jobs on the GPU machine's host cores (one call): bash gpu-host.sh [DEADLINE [JOBS]]
# (session 44's jobs-host.json by default; session 45 passed session45/jobs-host.json).
set -u
R=$PWD
JOBS=${2:-benchmarks/models/session44/jobs-host.json}
nproc > $OUT/host.txt; lscpu | grep "Model name" >> $OUT/host.txt; nvidia-smi --query-gpu=name --format=csv,noheader >> $OUT/host.txt
export PYTHONPATH=$R/packages/torch-diode-lib/src:$R/packages/torch-diode-models/src
python3 benchmarks/models/session31/cv_jobs.py $JOBS --out /tmp/rh --workers 10 \
    --deadline ${1:-540} --pack $OUT/host.tgz > $OUT/host.log 2>&1
tail -14 $OUT/host.log; cat $OUT/host.txt; ls -la $OUT
