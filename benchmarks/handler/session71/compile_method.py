"""Session 71, rule 5: is a cold compile measured the way this repository's scripts measure it (a
warm-up compile, then ``torch._inductor.utils.fresh_cache()`` and a compile in the same process)
the cold compile a user's fresh process pays?

``fresh_cache()`` points the parent process's Inductor and Triton caches at new folders, but
Inductor's compile workers, started by the warm-up, keep the folders they started with. Rule 3's
profile found Triton kernels compiled again in the main thread during Inductor's benchmark. This
counts ``make_cubin`` (``ptxas``) calls per thread and times the compile both ways:

    python benchmarks/handler/session71/compile_method.py harness MODEL OUT.json   # all cases, one process
    python benchmarks/handler/session71/compile_method.py fresh MODEL OUT.json CASE  # one case in this
        # process, which must have been started with empty TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR;
        # a warm-up compile of another GEMM first (starting the workers on those folders)

CASE: ``<problem>:<stock|default>``, the problem an index into ``PROBLEMS`` or the name of one of
``check_handler_gpu.SPEED_PROBLEMS`` (the README's speed check).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
sys.path.insert(0, str(HERE))

from slow_compile import PROBLEMS as SLOW_PROBLEMS  # noqa: E402
from slow_compile import use_old_method  # noqa: E402

PROBLEMS = [
    SLOW_PROBLEMS[0],  # addmm float16 2944x8320x1152, rule 3's
    {"op": "addmm", "m": 27, "n": 1280, "k": 2048, "batch": 1, "dtype": "bfloat16", "out_dtype": "bfloat16",
     "stride_a": [2048, 1], "stride_b": [1, 2048], "stride_bias": [0, 1]},
]  # fmt: skip
SETTINGS = {"stock": None, "default": {}}
CUBINS: Counter[str] = Counter()


def count_cubins() -> None:
    from triton.backends.nvidia import compiler as nvc

    make_cubin = nvc.CUDABackend.make_cubin

    def counted(self, *a, **kw):  # type: ignore[no-untyped-def]
        main = threading.current_thread() is threading.main_thread()
        CUBINS["main_thread" if main else "other_threads"] += 1
        return make_cubin(self, *a, **kw)

    nvc.CUDABackend.make_cubin = counted


def compile_case(model: str, case: str, cold: bool) -> dict:
    from check_handler_gpu import _enter_handler, cold_compile_state, stats_delta

    from torch_diode.bench.measure import compile_for, first_call_s
    from torch_diode.collect.inductor import gemm_function, make_inputs
    from torch_diode.records import Problem

    idx, setting = case.split(":")
    if idx.isdigit():
        p = Problem.from_dict(PROBLEMS[int(idx)])
        fn, args, what = gemm_function(p.op), make_inputs(p, "cuda"), p.key()
    else:
        from check_handler_gpu import SPEED_PROBLEMS, make_args

        sp = next(x for x in SPEED_PROBLEMS if x.name == idx)
        (fn, args), what = make_args(sp), sp.describe()
    CUBINS.clear()
    row: dict = {"case": case, "problem": what, "setting": setting}
    with contextlib.ExitStack() as stack:
        handle = _enter_handler(stack, model, SETTINGS[setting])
        before = handle.get_stats() if handle else None
        if cold:
            stack.enter_context(cold_compile_state())
        row["compile_s"] = round(first_call_s(compile_for("max-autotune", fn), args), 3)
        if handle is not None:
            row["diode"] = stats_delta(before, handle.get_stats())
    row["make_cubin_calls"] = dict(CUBINS)
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    from check_handler_gpu import GemmProblem, make_args

    from torch_diode.bench.measure import compile_for, environment

    mode, model, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    use_old_method()  # the harness is the one-process method this script tested
    count_cubins()
    result: dict = {"environment": environment(), "mode": mode, "rows": []}
    if mode == "harness":
        from check_handler_gpu import warm_up_compile

        warm_up_compile()
        for i in range(len(PROBLEMS)):
            for s in SETTINGS:
                result["rows"].append(compile_case(model, f"{i}:{s}", cold=True))
                out.write_text(json.dumps(result, indent=1))
    else:
        t0 = time.perf_counter()
        fn, args = make_args(GemmProblem("warmup", "mm", 256, 256, 256))
        compile_for("max-autotune", fn)(*args)
        result["warm_up_s"] = round(time.perf_counter() - t0, 3)
        result["rows"].append(compile_case(model, sys.argv[4], cold=False))
        out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
