#!/bin/bash
# Session 54 on the GPU machine's host CPUs: the networks of jobs-NAME.json (one thread each; jobs-tw.json: H200 seeds 0-6, H100 seeds 0-2, hidden 64 x 3 members with a hidden-32 screen),
# packed into $OUT/r-*.tgz. Resumable: finished jobs in $DIR/done are skipped. DIR (default benchmarks/models/session54) holds the
# jobs file and the done folder: session 55 runs its jobs-cap.json with DIR=benchmarks/models/session55.
set -o pipefail
DIR=${DIR:-benchmarks/models/session54}
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src PYTHONUNBUFFERED=1
nproc --all; python3 -c "import torch, numpy; print(torch.__version__, numpy.__version__)"
python3 benchmarks/models/session31/cv_jobs.py $DIR/jobs-${1:-tw}.json --out /tmp/r \
    --workers ${WORKERS:-9} --deadline ${DEADLINE:-560} --done $DIR/done --pack $OUT/r.tgz 2>&1 | tee $OUT/log.txt
