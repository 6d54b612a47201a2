#!/usr/bin/env bash
# Session 68, rule 1 (PLAN.md): on the GPU machine, from the repository root, with the wheels of
# `nox -s build` carried as dist/. Results under $OUT.
#   bash rule1.sh --check [TEST_PATHS...]   step 1, then the gpu tests of TEST_PATHS (none: no tests)
#   bash rule1.sh TEST_PATHS...             the gpu tests of TEST_PATHS only
set -u
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl
export PYTHONPATH=/tmp/site
{
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  date -u
} > "$OUT/env.txt" 2>&1
[ "$check" = 1 ] && {
  echo "== 1a. import torch_diode with the meta-wheel's plugin: registration, model loaded at registration"
  time python3 -c "
import torch_diode
from torch_diode.registry import current_registration
r = current_registration()
print('registered:', r and (r.name, r.hardware))
h = r.handle.handler
print('model loaded at registration:', h._model is not None, 'hash', h.model_hash())"
  echo "== 1b. the console script: version, then a collection with INFO logging"
  time /tmp/site/bin/diode --version
  time /tmp/site/bin/diode -v collect -o /tmp/c1.msgpack --num-shapes 2 --ops mm --dtypes bfloat16 --workers 1 --seed 0 --no-progress
  /tmp/site/bin/diode data stats /tmp/c1.msgpack
  echo "== 1c. python -m torch_diode hardware"
  time python3 -m torch_diode hardware
  date -u
} > "$OUT/h1.log" 2>&1
# 2. the gpu tests of the paths given, the plugin active in every test process (sources first on
# PYTHONPATH, /tmp/site after)
if [ "$#" -gt 0 ]; then
  python3 scripts/run_gpu_tests_parallel.py "$@" --deadline-s 440
  echo "run_gpu_tests_parallel $* exit $?" >> "$OUT/env.txt"
fi
