#!/usr/bin/env bash
# Session 78, rule 2 (PLAN.md): why the in-process measure test took 45 s after the sweep tests
# (8 s first in a process, session 68), and test_demo's time alone. Wheels of `nox -s build` as dist/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | grep -v "already exists" | tail -3
export PYTHONPATH=/tmp/site
bench=tests/test_bench.py::test_measure_a_gemm_in_default_and_max_autotune_mode
run() {  # name, then test ids: one new pytest process, its own Inductor cache, log with timestamps
  local name=$1; shift
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 250 python3 -m pytest -m gpu -p no:cacheprovider -q -rA --durations=0 \
    -o log_cli=true --log-cli-level=INFO --log-cli-format="%(asctime)s %(name)s %(message)s" "$@" > "$OUT/$name.log" 2>&1
  echo "$name exit $?" | tee -a "$OUT/$name.log"
  grep -E "^[0-9.]+s call|passed|failed" "$OUT/$name.log"
}
run bench_alone "$bench"
run bench_after_sweep tests/test_sweep_gpu.py::test_timings_are_repeatable "$bench"
run demo_alone tests/test_demo.py::test_demo_compiles_a_real_module_on_the_gpu
for f in "$OUT"/*.log; do gzip "$f"; done
