#!/usr/bin/env bash
# Session 78, rule 4 (PLAN.md). Wheels of `nox -s build` as dist/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | grep -v "already exists" | tail -3
export PYTHONPATH=/tmp/site
python3 scripts/run_gpu_tests_parallel.py tests/test_sweep_gpu.py --deadline-s 170
echo "run_gpu_tests_parallel tests/test_sweep_gpu.py exit $?" >> "$OUT/env.txt"
