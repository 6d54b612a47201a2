#!/usr/bin/env bash
# Session 77, rule 1 (PLAN.md): on the GPU machine, from the repository root, with the wheels of
# `nox -s build` carried as dist/. Results under $OUT.
#   bash rule1.sh A   the ptxas late-case check (ptxas_late.py), then the gpu tests of group A
#   bash rule1.sh B|C the gpu tests of group B or C
set -u
group="$1"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | tail -3
export PYTHONPATH=/tmp/site
case "$group" in
  A) tests=(tests/test_sweep_gpu.py tests/test_hardware.py)
     # sources first: the working tree's lib, as the tests take it
     unset TRITON_PTXAS_PATH
     PYTHONPATH="$PWD/packages/torch-diode-lib/src:/tmp/site" python3 benchmarks/handler/session77/ptxas_late.py > "$OUT/ptxas_late.log" 2>&1
     echo "ptxas_late exit $?" >> "$OUT/ptxas_late.log"
     tail -3 "$OUT/ptxas_late.log" ;;
  B) tests=(tests/test_collect_gpu.py::test_every_op_dtype_and_layout) ;;
  C) tests=(tests/test_collect_gpu.py::test_through_linear tests/test_collect_gpu.py::test_exhaustive_space_is_wider
            tests/test_collect_gpu.py::test_another_gpus_key_is_refused tests/test_collect_gpu.py::test_collect_cli_resumes
            tests/test_precompile_gpu.py tests/test_demo.py tests/test_bench.py) ;;
  *) echo "group A, B or C" >&2; exit 2 ;;
esac
# the plugin active in every test process (sources first on PYTHONPATH, /tmp/site after)
python3 scripts/run_gpu_tests_parallel.py "${tests[@]}" --deadline-s 520
echo "run_gpu_tests_parallel ${tests[*]} exit $?" >> "$OUT/env.txt"
