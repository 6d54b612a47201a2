#!/bin/bash
# Session 53 on the GPU machine's host CPUs: the H200 networks of jobs-h200.json (one thread each),
# packed into $OUT/r-*.tgz. Resumable: finished jobs in benchmarks/models/session53/done are skipped.
set -o pipefail
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src PYTHONUNBUFFERED=1
nproc --all; python3 -c "import torch, numpy; print(torch.__version__, numpy.__version__)"
python3 benchmarks/models/session31/cv_jobs.py benchmarks/models/session53/jobs-${1:-h200}.json --out /tmp/r \
    --workers ${WORKERS:-9} --deadline ${DEADLINE:-560} --done benchmarks/models/session53/done --pack $OUT/r.tgz 2>&1 | tee $OUT/log.txt
