#!/usr/bin/env bash
# Session 48, on the nvidia-h200 machine's host CPU: what the network cascade
# (ScoringOptions.network_shortlist) saves, per core and as bench_scoring.py reports it.
# Writes under $OUT: host.txt (the CPU, its topology, versions), pinned.{json,log}
# (benchmarks/models/session48/pinned.py over every CPU), bench.log (bench_scoring.py, each shipped
# file with shortlists $BENCH, default "128 0") and parts.log (session47/parts.py, the H200 file
# with its own scoring options).
# OLD_FEATURES=F.py (a features.py of an earlier commit) adds pinned.py's NAME/old variants;
# SHORTLISTS ("512 256 0"), ROUNDS (150) and CPUS (all) shape pinned.py's run.
set -u
export PYTHONPATH=packages/torch-diode-lib/src:packages/torch-diode-models/src
M=packages/torch-diode-models/src/torch_diode_models
{
    lscpu
    echo "nproc $(nproc)"
    echo "SMT siblings: $(sort -u /sys/devices/system/cpu/cpu*/topology/thread_siblings_list | tr '\n' ' ')"
    uptime
    python -c 'import sys, numpy, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__)'
} > "$OUT/host.txt" 2>&1
python benchmarks/models/session48/pinned.py --model "H200=$M/NVIDIA-H200-matmul.safetensors" \
    --model "H100=$M/NVIDIA-H100-matmul.safetensors" $(for s in ${SHORTLISTS:-512 256 0}; do echo --shortlist $s; done) \
    ${OLD_FEATURES:+--old-features "$OLD_FEATURES"} ${CPUS:+--cpus "$CPUS"} \
    --rounds "${ROUNDS:-150}" --output "$OUT/pinned.json" > "$OUT/pinned.log" 2>&1
for f in H200 H100; do
    for s in ${BENCH:-128 0}; do
        python scripts/bench_scoring.py --model "$M/NVIDIA-$f-matmul.safetensors" --network-shortlist $s --repeat 500
    done
done > "$OUT/bench.log" 2>&1
python benchmarks/handler/session47/parts.py "$M/NVIDIA-H200-matmul.safetensors" > "$OUT/parts.log" 2>&1
