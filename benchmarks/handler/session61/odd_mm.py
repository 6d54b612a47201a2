"""Session 61: why Inductor's autotuning picks a Triton config for ``odd_mm`` (mm fp16
1000x1000x1000) that the speed check (``scripts/check_handler_gpu.py``) times 1.5x slower than ATen.

For each problem, the eager ATen call and stock max-autotune's compiled function (cold compile,
``max-autotune-no-cudagraphs``, as the speed check compiles; Inductor prints its AUTOTUNE table to
stderr) are timed four ways: the speed check's CUDA-graph replays (``bench.measure.kernel_times_us``,
no L2 flush), ``triton.testing.do_bench`` (L2 flushed each rep), Inductor's own benchmarker
(``benchmarker.benchmark_gpu``, what its autotuning uses), and the CUDA time of each kernel under
``torch.profiler`` (20 calls). Prints one JSON object per problem.

    python benchmarks/handler/session61/odd_mm.py [--output F.json] [--show-all]     (GPU machine)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
from check_handler_gpu import GemmProblem, cold_compile_state, make_args, warm_up_compile  # noqa: E402

from torch_diode.bench.measure import compile_for, kernel_times_us  # noqa: E402

PROBLEMS = [
    GemmProblem("odd_mm", "mm", 1000, 1000, 1000),
    GemmProblem("odd_small", "mm", 127, 255, 383),
    GemmProblem("square_1024", "mm", 1024, 1024, 1024),
]


def timings(fn, args) -> dict[str, object]:
    import torch
    from torch._inductor.runtime.benchmarking import benchmarker
    from torch.profiler import ProfilerActivity, profile
    from triton.testing import do_bench

    out: dict[str, object] = {
        "graph_us": round(statistics.median(kernel_times_us(fn, args, graph_iters=20, reps=50)), 2),
        "do_bench_us": round(1e3 * do_bench(lambda: fn(*args), warmup=25, rep=100), 2),
        "inductor_benchmarker_us": round(1e3 * benchmarker.benchmark_gpu(lambda: fn(*args)), 2),
    }
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fn(*args)
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t and e.count:
            kernels[e.key[:120]] = {"calls": e.count, "us_per_call": round(t / e.count, 2)}
    out["profiler_kernels"] = kernels
    return out


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output")
    ap.add_argument("--show-all", action="store_true", help="Inductor's AUTOTUNE table with every choice, not 10")
    a = ap.parse_args()
    if a.show_all:
        import torch._inductor.config as inductor_config

        inductor_config.autotune_num_choices_displayed = None
    warm_up_compile()
    rows = []
    for p in PROBLEMS:
        fn, args = make_args(p)
        row: dict[str, object] = {"problem": p.name, "shape": p.describe(), "aten": timings(fn, args)}
        print(f"== {p.name}: stock max-autotune compile (its AUTOTUNE table follows on stderr)", file=sys.stderr)
        with cold_compile_state():
            compiled = compile_for("max-autotune", fn)
            compiled(*args)
            torch.cuda.synchronize()
            row["stock_compiled"] = timings(compiled, args)
            ref = fn(*args)
            row["max_abs_diff"] = float((compiled(*args) - ref).abs().max())
        rows.append(row)
        print(json.dumps(row), flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    if a.output:
        Path(a.output).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
