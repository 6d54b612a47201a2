"""Session 73's open question, for a later GPU call: does a compile that starts once Inductor's
compile-worker pool is ready have its benchmarked kernels compiled twice (in the workers, then in
the main process)? Each case runs in a new process (``torch_diode.bench.isolate``: new, empty
Inductor and Triton folders): a stock warm-up compile of another GEMM
(``check_handler_gpu.warm_up_compile``), then, with ``--wait``, polling
``AsyncCompile.use_process_pool()`` until it is true (the pool ready), then one stock max-autotune
cold compile of the problem, counting Triton's ``make_cubin`` calls in the main thread and in other
threads of the process (``session71/compile_method.py``; the workers' own compiles are in other
processes and not counted). The hypothesis predicts, with ``--wait``, about one main-thread
``make_cubin`` per benchmarked Triton choice and a longer compile; without, 0-1.

    python benchmarks/handler/session73/pool_ready.py OUT.json PROBLEM[,PROBLEM...] [--wait-s 120]

PROBLEM: a ``check_handler_gpu.SPEED_PROBLEMS`` name. Each problem is compiled in two processes,
without and with the wait; ``OUT`` is rewritten after each.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parents[2] / "scripts"
SESSION71 = HERE.parent / "session71"
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(SESSION71))


def wait_for_pool(wait_s: float) -> dict[str, Any]:
    """``torch_diode.bench.measure.wait_for_compile_workers`` under this script's keys: whether the
    pool became ready within ``wait_s`` and after how long."""
    from torch_diode.bench.measure import wait_for_compile_workers

    got = wait_for_compile_workers(wait_s)
    return {"pool_ready": got["compile_pool_ready"], "waited_s": got["compile_pool_waited_s"]}


def probe(*, problem: str, wait_s: float | None) -> dict[str, Any]:
    """In the new process: the warm-up, the wait (``wait_s``; None: none), one stock cold compile."""
    import compile_method as cm
    from check_handler_gpu import SPEED_PROBLEMS, make_args, warm_up_compile
    from torch._dynamo.utils import counters
    from torch._inductor.async_compile import AsyncCompile

    from torch_diode.bench.measure import cold_compile_state, compile_for, first_call_s
    from torch_diode.inductor import stock_inductor

    cm.count_cubins()
    fn, args = make_args(next(p for p in SPEED_PROBLEMS if p.name == problem))
    warm_up_compile(fresh_caches=False)
    out: dict[str, Any] = {"problem": problem}
    out.update(
        wait_for_pool(wait_s) if wait_s is not None else {"pool_ready_at_start": AsyncCompile.use_process_pool()}
    )
    cm.CUBINS.clear()
    before = dict(counters["inductor"])
    with stock_inductor(), cold_compile_state(fresh_caches=False):
        out["compile_s"] = round(first_call_s(compile_for("max-autotune", fn), args), 3)
    out["make_cubin"] = dict(cm.CUBINS)
    out["inductor_counters"] = {
        k: v - before.get(k, 0) for k, v in counters["inductor"].items() if v != before.get(k, 0)
    }
    return out


def main() -> int:
    from torch_diode._files import atomic_write
    from torch_diode.bench.isolate import run_in_new_process
    from torch_diode.bench.measure import environment

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", type=Path)
    ap.add_argument("problems")
    ap.add_argument("--wait-s", type=float, default=120.0)
    a = ap.parse_args()
    result: dict[str, Any] = {"environment": environment(), "rows": []}
    for name in a.problems.split(","):
        for wait in (None, a.wait_s):
            r = run_in_new_process(
                "pool_ready:probe", {"problem": name, "wait_s": wait}, paths=[HERE, SCRIPTS, SESSION71], timeout_s=400
            )
            result["rows"].append({"wait": wait is not None, **r})
            print(json.dumps(result["rows"][-1]), flush=True)
            atomic_write(a.output, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
