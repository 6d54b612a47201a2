#!/usr/bin/env bash
# Session 77, rule 2 (PLAN.md): on the GPU machine, from the repository root, with the wheels of
# `nox -s build` carried as dist/. Results under $OUT.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | tail -1
unset TRITON_PTXAS_PATH
PYTHONPATH="$PWD/packages/torch-diode-lib/src:/tmp/site" TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) \
  timeout 150 python3 benchmarks/handler/session77/sweep_ptxas.py > "$OUT/sweep_ptxas.log" 2>&1
echo "sweep_ptxas exit $?" >> "$OUT/sweep_ptxas.log"
grep '^{' "$OUT/sweep_ptxas.log"
export PYTHONPATH=/tmp/site
# the failing order of rule 1's call C, the new test, and the test call C's deadline stopped
python3 scripts/run_gpu_tests_parallel.py tests/test_collect_gpu.py::test_through_linear \
  tests/test_precompile_gpu.py::test_capture_emulate_install_and_measure \
  tests/test_sweep_gpu.py::test_loads_what_its_compile_processes_built_after_a_late_ptxas_variable \
  tests/test_bench.py::test_bench_runs_and_resumes --deadline-s 300
