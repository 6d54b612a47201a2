#!/usr/bin/env bash
# Session 78, rule 1 (PLAN.md): on the GPU machine, from the repository root, with the wheels of
# `nox -s build` carried as dist/. Results under $OUT.
#   bash rule1.sh A   ptxas_path.py, late_measure.py, then session 77's rule-2 tests in the failing order
#   bash rule1.sh B   test_sweep_gpu.py, then test_bench's in-process measure test and test_demo
set -u
group="$1"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | tail -3
here=benchmarks/handler/session78
case "$group" in
  A) for script in ptxas_path late_measure; do
       ( unset TRITON_PTXAS_PATH
         PYTHONPATH="$PWD/packages/torch-diode-lib/src:/tmp/site" TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) \
           timeout 200 python3 "$here/$script.py" > "$OUT/$script.log" 2>&1
         echo "$script exit $?" >> "$OUT/$script.log" )
       grep -E '^\{|exit' "$OUT/$script.log" | cut -c1-400
     done
     tests=(tests/test_collect_gpu.py::test_through_linear tests/test_precompile_gpu.py::test_capture_emulate_install_and_measure
            tests/test_sweep_gpu.py::test_loads_what_its_compile_processes_built_after_a_late_ptxas_variable) ;;
  B) tests=(tests/test_sweep_gpu.py tests/test_bench.py::test_measure_a_gemm_in_default_and_max_autotune_mode tests/test_demo.py) ;;
  *) echo "group A or B" >&2; exit 2 ;;
esac
export PYTHONPATH=/tmp/site
python3 scripts/run_gpu_tests_parallel.py "${tests[@]}" --deadline-s 330
echo "run_gpu_tests_parallel ${tests[*]} exit $?" >> "$OUT/env.txt"
