#!/bin/bash
# Session 56 on the GPU machine (nvidia-h200; networks on its GPU, as session 54's jobs): fine-tuning H100 networks from
# H200 ones (TrainOptions.init_from). Phase 1 (jobs-pre.json, or $PRE): session 54's H200 `tw` networks of seeds 0-2, retrained
# here (the same jobs, the same machine kind) because the working tree may not carry them (64 MiB), and H100 `tw`
# networks of seeds 3-4; phase 2 (jobs-ft.json, or $FT): the H100 fine-tunes, starting from phase 1's saved H200
# models in /tmp/pre. Results packed into $OUT/pre*.tgz and $OUT/r*.tgz. Finished phase-2 jobs found in $DIR/done are
# skipped (phase 1 always runs: the start networks live only in the call's /tmp).
set -o pipefail
DIR=benchmarks/models/session56
export PYTHONPATH=$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src PYTHONUNBUFFERED=1
nproc --all; python3 -c "import torch, numpy; print(torch.__version__, numpy.__version__)"
t0=$(date +%s)
python3 benchmarks/models/session31/cv_jobs.py $DIR/${PRE:-jobs-pre.json} --out /tmp/pre --workers ${PRE_WORKERS:-5} \
    --deadline ${PRE_DEADLINE:-330} --pack $OUT/pre.tgz 2>&1 | tee $OUT/log-pre.txt
left=$(( ${DEADLINE:-565} - $(date +%s) + t0 ))
python3 benchmarks/models/session31/cv_jobs.py $DIR/${FT:-jobs-ft.json} --out /tmp/r --workers ${WORKERS:-9} \
    --deadline $left --done $DIR/done --pack $OUT/r.tgz 2>&1 | tee $OUT/log.txt
