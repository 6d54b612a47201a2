#!/usr/bin/env bash
# Session 80, rule 1 (PLAN.md): on the GPU machine, from the repository root, with the wheels of
# `nox -s build` carried as dist/. Every `gpu` test, in three groups (session 79's, test_bench_runs_and_resumes moved from C to A). Results under $OUT.
#   bash rule1.sh A|B|C
set -u
group="$1"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | tail -3
export PYTHONPATH=/tmp/site
unset TRITON_PTXAS_PATH
case "$group" in
  A) tests=(tests/test_sweep_gpu.py tests/test_hardware.py tests/test_bench.py::test_bench_runs_and_resumes) ;;
  B) tests=(tests/test_collect_gpu.py::test_every_op_dtype_and_layout) ;;
  C) tests=(tests/test_collect_gpu.py::test_through_linear tests/test_collect_gpu.py::test_exhaustive_space_is_wider
            tests/test_collect_gpu.py::test_another_gpus_key_is_refused tests/test_collect_gpu.py::test_collect_cli_resumes
            tests/test_precompile_gpu.py tests/test_demo.py tests/test_bench.py::test_measure_a_gemm_in_default_and_max_autotune_mode) ;;
  *) echo "group A, B or C" >&2; exit 2 ;;
esac
# the plugin active in every test process (sources first on PYTHONPATH, /tmp/site after)
python3 scripts/run_gpu_tests_parallel.py "${tests[@]}" --deadline-s "${DEADLINE:-540}"
echo "run_gpu_tests_parallel ${tests[*]} exit $?" >> "$OUT/env.txt"
