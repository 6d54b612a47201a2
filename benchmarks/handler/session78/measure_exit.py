"""Session 78, rule 3 (PLAN.md): where the in-process ``measure()``'s wall time goes.

Rule 2: the measure test (a warm-up compile per mode, then one measure each of default and
max-autotune) took 42 s alone in a new process; its log showed about 7 s after each compile's
handler restore before the next step. Suspected: ``cold_compile_state``'s exit stops Inductor's
compile workers (``fresh_compile_folders``, session 73), and the pool the compile started in the
background is still starting (its processes importing torch): ``SubprocPool.shutdown`` waits for
its sidecar to exit. One process; ``shutdown_compile_workers`` wrapped to time each call and say
whether the pool was ready; ``quick_gemms()[0]``, default then stock max-autotune twice.
"""

from __future__ import annotations

import json
import sys
import time

from torch._inductor import async_compile as ac

from torch_diode.bench import measure
from torch_diode.bench.suite import quick_gemms

CALLS: list[dict] = []
_shutdown = ac.shutdown_compile_workers


def timed_shutdown() -> None:
    rf = ac.AsyncCompile._ready_future
    t0 = time.perf_counter()
    _shutdown()
    CALLS.append({"s": round(time.perf_counter() - t0, 2), "pool_ready": rf.done() if rf is not None else None})


ac.shutdown_compile_workers = timed_shutdown


def main() -> int:
    case = quick_gemms()[0]
    fn, args = case.build("cuda")
    for mode in ("default", "max-autotune", "max-autotune"):
        CALLS.clear()
        t0 = time.perf_counter()
        m = measure.measure(fn, args, mode, graph_iters=5, reps=5)
        out = {"mode": mode, "compile_s": round(m.compile_s, 2), "measure_wall_s": round(time.perf_counter() - t0, 2)}
        print(json.dumps({**out, "shutdowns": list(CALLS)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
