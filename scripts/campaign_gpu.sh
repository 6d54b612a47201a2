#!/usr/bin/env bash
# One time-boxed chunk of a GPU's data campaign on the GPU machine (device tool), from the
# repository root: the training split (with --top-up) on some GPUs and the validation split on
# the others, in parallel, each stopping between problems before the 10-minute command limit.
#
#   bash scripts/campaign_gpu.sh NVIDIA-H200 0,1 2        # x4 machine: train on GPUs 0-1, val on 2
#   bash scripts/campaign_gpu.sh NVIDIA-H100 0 ""          # one GPU: training only
#   bash scripts/campaign_gpu.sh NVIDIA-H100 "" 0          # one GPU: validation only
#   bash scripts/campaign_gpu.sh NVIDIA-H200 0,1 2 3      # x4: and the repeatability re-measurement on 3
#
# Kernels compiled elsewhere (`campaign.py precompile`, no GPU needed): PRECOMPILED="pack.tar.xz ..."
# (carried paths) installs them into Triton's cache and measures their problems first; TARGET=1
# first writes data/KEY/triton-target.json (what precompile needs of this machine's Triton).
#
# ONLY=output-misaligned (a `campaign.py run --only` group) collects that group of the training
# plan alone; MAX_GFLOP=G leaves its problems of more than G GFLOP for a later chunk.
#
# Environment: BUDGET (seconds before no new problem starts; default 420), DEADLINE (seconds after
# which the runs are interrupted, SIGINT then SIGKILL 30 s later, whatever they are doing; default
# 530, so the pack below is made inside the device's 10-minute limit even when one problem runs
# long: a full-space fp32 validation problem can take several minutes), RUN (log name suffix).
# The data files are written in place under data/KEY/ (every finished problem is kept, an
# interrupted run's shards merged, the timed part of an unfinished problem kept in
# <split>.msgpack.partial for the next chunk to complete) and packed, with the logs, into
# $OUT/KEY-data.tgz to copy back into the repository. The device tool re-sends the working tree
# on every call, so whatever this chunk wrote is only kept if that pack comes back: copy it in
# before the next call with
#   python scripts/campaign.py unpack --hardware KEY KEY-data.tgz
# (all or nothing; it also removes the sidecars the chunk settled, which plain `tar x` leaves
# behind and tests/test_data_files.py then refuses).
set -uo pipefail
KEY=${1:?hardware key}; TRAIN_GPUS=${2-}; VAL_GPUS=${3-}; REPEAT_GPUS=${4-}
BUDGET=${BUDGET:-420}; DEADLINE=${DEADLINE:-530}; RUN=${RUN:-$(date -u +%Y%m%dT%H%M)}
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/campaign-out}; mkdir -p "$OUT" "data/$KEY/logs"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
if [ -n "${TARGET:-}" ]; then python3 scripts/campaign.py target --hardware "$KEY" || echo "campaign.py target failed"; fi
PRE=(); if [ -n "${PRECOMPILED:-}" ]; then read -r -a packs <<< "$PRECOMPILED"; PRE=(--precompiled "${packs[@]}"); fi
GROUP=(); if [ -n "${ONLY:-}" ]; then GROUP=(--only "$ONLY"); fi
if [ -n "${MAX_GFLOP:-}" ]; then GROUP+=(--max-gflop "$MAX_GFLOP"); fi
count() { [ -z "$1" ] && echo 0 || echo "$1" | tr ',' '\n' | wc -l; }
NGPU=$(( $(count "$TRAIN_GPUS") + $(count "$VAL_GPUS") + $(count "$REPEAT_GPUS") ))
[ "$NGPU" -gt 0 ] || { echo "no GPU given for either split" >&2; exit 2; }
CW=$(( $(nproc) / NGPU - 1 )); [ "$CW" -ge 1 ] || CW=1
echo "$KEY: train on GPUs [$TRAIN_GPUS], val on GPUs [$VAL_GPUS], repeat on GPUs [$REPEAT_GPUS], $CW compile processes per GPU, budget $BUDGET s, deadline $DEADLINE s"
run() { timeout --signal=INT --kill-after=30 "$DEADLINE" "$@"; }
S=$(date +%s)
pids=()
if [ -n "$TRAIN_GPUS" ]; then
  CUDA_VISIBLE_DEVICES=$TRAIN_GPUS run python3 scripts/campaign.py run --hardware "$KEY" --split train --top-up "${PRE[@]}" "${GROUP[@]}" \
    --time-budget "$BUDGET" --compile-workers "$CW" --no-progress > "data/$KEY/logs/train-literal-$RUN.log" 2>&1 &
  pids+=($!)
fi
if [ -n "$VAL_GPUS" ]; then
  CUDA_VISIBLE_DEVICES=$VAL_GPUS run python3 scripts/campaign.py run --hardware "$KEY" --split val "${PRE[@]}" \
    --time-budget "$BUDGET" --compile-workers "$CW" --no-progress > "data/$KEY/logs/val-literal-$RUN.log" 2>&1 &
  pids+=($!)
fi
if [ -n "$REPEAT_GPUS" ]; then
  CUDA_VISIBLE_DEVICES=$REPEAT_GPUS run python3 scripts/campaign.py run --hardware "$KEY" --split repeat \
    --time-budget "$BUDGET" --compile-workers "$CW" --no-progress > "data/$KEY/logs/repeat-literal-$RUN.log" 2>&1 &
  pids+=($!)
fi
rc=0
for p in "${pids[@]}"; do
  wait "$p"; s=$?
  # 124: `timeout` stopped it at DEADLINE (its finished problems and checkpointed parts are kept)
  if [ "$s" -eq 124 ]; then echo "a run was interrupted at the $DEADLINE s deadline"; elif [ "$s" -ne 0 ]; then rc=1; fi
done
echo "done in $(( $(date +%s) - S )) s (rc $rc)"
for f in data/"$KEY"/logs/*-literal-"$RUN".log; do echo "== $f"; tail -n 2 "$f"; done
# A run killed after its grace period leaves its ranks' shards: merge them (finished problems only).
python3 - "$KEY" <<'PY' || rc=1
import glob, sys
from torch_diode.collect import merge_shards, settle_partials
for split in ("train", "val", "train-repeat"):
    out = f"data/{sys.argv[1]}/{split}.msgpack"
    shards = sorted(glob.glob(f"data/{sys.argv[1]}/{split}.rank*.msgpack"))
    if shards:  # merge_shards settles the checkpointed parts too
        print(f"merging {len(shards)} leftover shard(s) into {out}")
        merge_shards(out, shards)
    else:  # the parts of unfinished problems, the ranks' too, into <split>.msgpack.partial
        settle_partials(out)
PY
tar czf "$OUT/$KEY-data.tgz" --exclude="data/$KEY/shared-spec" "data/$KEY"
exit $rc
