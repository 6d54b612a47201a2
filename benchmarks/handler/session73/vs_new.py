"""Session 73: session 63's ``changed.py time`` with each cold compile in a new process of its own
(``torch_diode.bench.isolate``: new, empty Inductor and Triton cache folders, the warm-up of
``check_handler_gpu.warm_up_new_process`` there first), for comparing with the same problems
compiled in one process (``changed.py time``, each compile in ``cold_compile_state()``, which
since session 72 shuts the compile workers down so that new ones start in its folders).

    python benchmarks/handler/session73/vs_new.py LIST.json MODEL OUT.json [--order stock,default]
        [--budget S] [--first N]

``OUT`` has ``changed.py time``'s format (``changed.py report`` reads it) and is rewritten after
every problem; a rerun skips the problems it holds whole (resumable), and refuses a file of
another order, model, options or method (each run's environment is kept, in ``environments``).
Each problem's eager ATen kernel time is taken in its first variant's process, after the
compile. ``--budget S``: a problem is started only while at least 60 s per variant of it are left
of S, and each process's timeout is what is left (at least 60 s), so the run ends by about S + 60
s; ``--first N``: the list's first N problems only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parents[2] / "scripts"
SESSION63 = HERE.parent / "session63"
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(SESSION63))


def isolated(
    *, model: str, options: dict[str, Any] | None, problem: dict[str, Any], eager: bool, graph_iters: int, reps: int
) -> dict[str, Any]:
    """In the new process: the warm-up, then one cold compile of ``problem`` and its kernel time
    (``check_handler_gpu.compile_and_time``), and with ``eager`` eager ATen's kernel time."""
    import torch
    from check_handler_gpu import compile_and_time, kernel_time_us, warm_up_new_process

    from torch_diode.collect.inductor import gemm_function, make_inputs
    from torch_diode.records import Problem

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as the training timings: IEEE
    p = Problem.from_dict(problem)
    fn, args = gemm_function(p.op), make_inputs(p, "cuda")
    warm_up_new_process(model, options)
    out = compile_and_time(
        model, options, fn, args, graph_iters=graph_iters, reps=reps, kernel_digits=3, fresh_caches=False
    )
    if eager:
        out["aten_kernel_us"] = round(kernel_time_us(fn, args, graph_iters=graph_iters, reps=reps), 3)
    return out


def main() -> int:
    from changed import VARIANTS

    from torch_diode._files import atomic_write
    from torch_diode.bench.isolate import run_in_new_process
    from torch_diode.bench.measure import environment
    from torch_diode.records import Problem

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("list")
    ap.add_argument("model")
    ap.add_argument("output", type=Path)
    ap.add_argument("--order", default="stock,default")
    ap.add_argument("--budget", type=float, default=None)
    ap.add_argument("--first", type=int, default=None)
    a = ap.parse_args()
    order = a.order.split(",")
    unknown = sorted(set(order) - set(VARIANTS))
    if unknown:
        ap.error(f"--order: unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    listed = json.loads(Path(a.list).read_text())["problems"][: a.first]
    options = {v: VARIANTS[v] for v in order}
    env = environment()  # once: it reads the ptxas versions in new processes
    result: dict[str, Any] = {
        "environment": env,
        "model": a.model,
        "order": order,
        "options": options,
        "cold_compile": "a new process per compile (torch_diode.bench.isolate), after a warm-up there",
        "rows": [],
    }
    if a.output.exists():
        old = json.loads(a.output.read_text())
        same = ("order", "model", "options", "cold_compile")
        if any(old.get(k) != result[k] for k in same):
            raise SystemExit(f"{a.output} holds another run ({', '.join(same)} differ); name a new file")
        result["environment"] = old["environment"]
        result["environments"] = old.get("environments", [old["environment"]])
        result["rows"] = [r for r in old["rows"] if all("kernel_us" in x for x in r["runs"])]
    result.setdefault("environments", []).append(env)
    done = {r["key"] for r in result["rows"]}
    t0 = time.monotonic()
    for entry in listed:
        p = Problem.from_dict(entry["problem"])
        if p.key() in done:
            continue
        if a.budget and a.budget - (time.monotonic() - t0) < 60 * len(order):
            break
        row: dict[str, Any] = {"problem": entry["problem"], "key": p.key(), "runs": []}
        for i, variant in enumerate(order):
            kwargs = {
                "model": a.model,
                "options": VARIANTS[variant],
                "problem": entry["problem"],
                "eager": i == 0,
                "graph_iters": 20,
                "reps": 20,
            }
            timeout = max(60.0, a.budget - (time.monotonic() - t0)) if a.budget else 540.0
            run = run_in_new_process("vs_new:isolated", kwargs, paths=[HERE, SCRIPTS], timeout_s=timeout)
            if "aten_kernel_us" in run:
                row["aten_kernel_us"] = run.pop("aten_kernel_us")
            row["runs"].append({"variant": variant, **run})
        result["rows"].append(row)
        atomic_write(a.output, json.dumps(result, indent=1))
        times = " ".join(
            f"{r['variant']} {r.get('compile_s', math.nan):.2f} s {r.get('kernel_us', math.nan):.2f} us"
            for r in row["runs"]
        )
        print(f"{p.key():<60} {times} aten {row.get('aten_kernel_us', math.nan):.2f}", flush=True)
    print(f"{len(result['rows'])} of {len(listed)} problems in {a.output} ({time.monotonic() - t0:.0f} s this run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
