#!/usr/bin/env bash
# Session 78, rule 3 (PLAN.md). Wheels of `nox -s build` as dist/.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site dist/*.whl 2>&1 | grep -v "already exists" | tail -3
PYTHONPATH="$PWD/packages/torch-diode-lib/src:/tmp/site" TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) \
  timeout 240 python3 benchmarks/handler/session78/measure_exit.py > "$OUT/measure_exit.log" 2>&1
echo "measure_exit exit $?" >> "$OUT/measure_exit.log"
grep -E '^\{|exit' "$OUT/measure_exit.log"
