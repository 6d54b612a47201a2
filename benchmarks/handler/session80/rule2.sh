#!/usr/bin/env bash
# Session 80, rule 2 (PLAN.md): on the GPU machine, from the repository root, with the wheels of
# `nox -s build` carried as dist/. The `gpu` tests of what this session's CPU changes touch (resume, checkpointed parts, isolated measurements). Results under $OUT.
#   bash rule2.sh R
set -u
group="$1"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | tail -3
export PYTHONPATH=/tmp/site
unset TRITON_PTXAS_PATH
case "$group" in
  R) tests=(tests/test_sweep_gpu.py::test_sampled_sweep_and_runner
            tests/test_sweep_gpu.py::test_a_problem_is_checkpointed_while_its_compiled_kernels_are_timed
            tests/test_sweep_gpu.py::test_checkpointed_parts_cover_the_problem_once
            tests/test_collect_gpu.py::test_collect_cli_resumes tests/test_bench.py::test_bench_runs_and_resumes) ;;
  *) echo "group R" >&2; exit 2 ;;
esac
# the plugin active in every test process (sources first on PYTHONPATH, /tmp/site after)
python3 scripts/run_gpu_tests_parallel.py "${tests[@]}" --deadline-s "${DEADLINE:-540}"
echo "run_gpu_tests_parallel ${tests[*]} exit $?" >> "$OUT/env.txt"
