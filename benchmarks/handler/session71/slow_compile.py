"""Session 71, rule 3: where the 20-56 s cold compiles of two addmm problems go (rules 1-2 saw
them with the handler's defaults and with ``min_num_warps=4`` alike).

For each problem and setting (``stock``: Inductor without the handler; ``default``: the handler's
defaults), one cold ``max-autotune`` compile under cProfile: its seconds, the handler's stats, and
the profile's top functions by cumulative and by own time (``OUT/slow-compile.json``).

    python benchmarks/handler/session71/slow_compile.py MODEL OUT_DIR [--settings stock,default] [--top 40]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))
sys.path.insert(0, str(HERE.parent / "session64"))

PROBLEMS = [
    {"op": "addmm", "m": 2944, "n": 8320, "k": 1152, "batch": 1, "dtype": "float16", "out_dtype": "float16",
     "stride_a": [1152, 1], "stride_b": [8320, 1], "stride_bias": [0, 1]},
    {"op": "addmm", "m": 640, "n": 22144, "k": 1920, "batch": 1, "dtype": "float16", "out_dtype": "float16",
     "stride_a": [1920, 1], "stride_b": [22144, 1], "stride_bias": [0, 1]},
]  # fmt: skip


@contextlib.contextmanager
def old_cold_compile_state(**_: object):  # type: ignore[no-untyped-def]
    """``check_handler_gpu.cold_compile_state()`` as sessions <= 71 measured with it (its default,
    ``fresh_caches=True``, the only one they used): dynamo reset and ``fresh_cache()``, the compile
    workers left as they are."""
    import torch
    from torch._inductor.utils import fresh_cache

    torch._dynamo.reset()
    with fresh_cache():
        yield
    torch._dynamo.reset()


def use_old_method() -> None:
    """Make ``check_handler_gpu`` (its warm-up and its callers' cold compiles) measure as until session 72."""
    import check_handler_gpu

    check_handler_gpu.cold_compile_state = old_cold_compile_state


def main() -> int:
    use_old_method()
    from check_handler_gpu import _enter_handler, cold_compile_state, stats_delta, warm_up_compile
    from profile_compile import top  # session 64's report of a profile

    from torch_diode.bench.measure import compile_for, environment
    from torch_diode.collect.inductor import gemm_function, make_inputs
    from torch_diode.records import Problem

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out", type=Path)
    ap.add_argument("--settings", default="stock,default")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    settings = {"stock": None, "default": {}}
    result: dict = {"environment": environment(), "model": a.model, "runs": []}
    warm_up_compile()
    for d in PROBLEMS:
        p = Problem.from_dict(d)
        fn, args = gemm_function(p.op), make_inputs(p, "cuda")
        for name in a.settings.split(","):
            run: dict = {"problem": p.key(), "setting": name}
            prof = cProfile.Profile()
            with contextlib.ExitStack() as stack:
                handle = _enter_handler(stack, a.model, settings[name])
                before = handle.get_stats() if handle else None
                stack.enter_context(cold_compile_state())
                compiled = compile_for("max-autotune", fn)
                t0 = time.perf_counter()
                prof.enable()
                compiled(*args)
                import torch

                torch.cuda.synchronize()
                prof.disable()
                run["compile_s"] = round(time.perf_counter() - t0, 3)
                if handle is not None:
                    run["diode"] = stats_delta(before, handle.get_stats())
            st = pstats.Stats(prof)
            run["top_cumulative"] = top(st, "cumulative", a.top)
            run["top_own"] = top(st, "tottime", a.top)
            result["runs"].append(run)
            (a.out / "slow-compile.json").write_text(json.dumps(result, indent=1))
            print(f"{p.key():<50} {name:<8} {run['compile_s']:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
