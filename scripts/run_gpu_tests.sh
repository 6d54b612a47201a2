#!/usr/bin/env bash
# Run the pytest tests marked `gpu` on the GPU machine, from the repository root: all of them
# (every area: ~10 minutes on an H100), or those of the test files or node ids given.
#   bash scripts/run_gpu_tests.sh [test paths] [extra pytest args]
#   bash scripts/run_gpu_tests.sh tests/test_sweep_gpu.py -x     # the sweep's alone (~2 minutes)
# On a machine of several GPUs, scripts/run_gpu_tests_parallel.py runs them on every GPU at once.
# Results go to $OUT (the device tool's output folder) or ./gpu-test-results:
#   gpu-tests.log (full output), gpu-tests.xml (JUnit), env.txt (GPU, torch, triton).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/packages/torch-diode-lib/src:$PWD/packages/torch-diode-models/src:$PWD/packages/torch-diode/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# A fresh Inductor/Triton cache per run: warm caches skip the code paths under test.
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$(mktemp -d)}"
RESULTS="${OUT:-$PWD/gpu-test-results}"
mkdir -p "$RESULTS"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} > "$RESULTS/env.txt" 2>&1
cat "$RESULTS/env.txt"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' || { echo "no CUDA GPU visible: the gpu tests would all be skipped" >&2; exit 3; }
# Paths given replace `tests` (pytest would otherwise collect both and run every gpu test).
paths=(); for a in "$@"; do case "$a" in -*) ;; *) [ -e "${a%%::*}" ] && paths+=("$a") ;; esac; done
[ ${#paths[@]} -gt 0 ] || set -- tests "$@"
python3 -m pytest -m gpu -p no:cacheprovider -q -rA --junitxml="$RESULTS/gpu-tests.xml" "$@" 2>&1 | tee "$RESULTS/gpu-tests.log"
exit "${PIPESTATUS[0]}"
