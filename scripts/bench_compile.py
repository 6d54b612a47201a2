"""How fast the sweep's compile processes compile kernels on this machine, per process count and
environment: the compile half of a data campaign's cost (a training problem's ~25 GPU-s on an
H100 are ~90% waiting for its ~330 kernels to compile).

Each setting gets a fresh pool of compile processes (warmed up first: their imports are not
counted) and a fresh Triton cache, and compiles ``--kernels`` Triton choices spread over one
problem's exhaustive space, literal sizes, as ``campaign.py run`` compiles them (the sweep's own
compile-process set-up and compile task).

    python scripts/bench_compile.py --workers 1,8,15 --env MLIR_DISABLE_MULTITHREADING=1
    # no GPU: emulate the GPU machine's Triton (triton-target.json, the Triton of that file)
    python scripts/bench_compile.py --workers 2 --emulate data/NVIDIA-H100/triton-target.json

Per setting it prints and writes (``--output``, JSON) the wall time, kernels per second, the
mean wall time of one kernel's compile inside its process, and the CPU-seconds the processes
and their ``ptxas`` used per kernel (``RUSAGE_CHILDREN`` over the pool's life, warm-up included).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from torch_diode.bench.measure import cpu_model, environment
from torch_diode.collect import precompile as pc
from torch_diode.collect import sweep
from torch_diode.records import Problem


def _init(cache_dir: str, parent: int, env: dict[str, str], target: dict[str, Any] | None) -> None:
    sweep._worker_init(cache_dir, parent)
    if target is not None:
        pc.emulate(pc.Target.from_dict(target))  # sets the target's cache-invalidating variables
    os.environ.update(env)  # after emulate(), which would drop a cache-invalidating one of this setting's


def _warm() -> int:
    import triton  # noqa: F401

    from torch_diode.collect import sweep_kernels  # noqa: F401

    time.sleep(0.2)  # one warm-up task per process: each stays busy long enough not to take two
    return os.getpid()


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {**environment(), "cpu_count": os.cpu_count()}
    if hasattr(os, "sched_getaffinity"):
        info["affinity"] = len(os.sched_getaffinity(0))
    for path in ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        if os.path.exists(path):
            info["cgroup_cpu"] = Path(path).read_text().strip()
            break
    info["cpu"] = cpu_model()
    return info


def run_setting(problem: Problem, choices: list[Any], workers: int, env: dict[str, str], target: pc.Target | None,
                options: dict[str, Any], revision: int, shared_memory_limit: int | None) -> dict[str, Any]:  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="diode-bench-compile-") as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        ctx = multiprocessing.get_context("spawn")
        init = (cache, os.getpid(), env, None if target is None else target.to_dict())
        with cf.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init, initargs=init) as pool:
            pids = {f.result() for f in [pool.submit(_warm) for _ in range(workers)]}
            t0 = time.perf_counter()
            futs = [
                pool.submit(
                    sweep._compile_task, problem.to_dict(), c.to_dict(), revision, options, True, None,
                    shared_memory_limit,
                )
                for c in choices
            ]  # fmt: skip
            results = [f.result() for f in futs]
            wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ok = [float(m) for s, m in results if s == "ok"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "workers": workers,
        "processes_warmed": len(pids),
        "env": env,
        "kernels": len(choices),
        "ok": len(ok),
        "wall_s": round(wall, 2),
        "kernels_per_s": round(len(choices) / wall, 2),
        "mean_kernel_s": round(sum(ok) / max(1, len(ok)), 3),
        "cpu_s_per_kernel": round(cpu / max(1, len(choices)), 3),
        "statuses": dict(sorted(Counter(s for s, _ in results).items())),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default='{"op": "addmm", "m": 509, "n": 8191, "k": 509, "dtype": "bfloat16", '
                    '"stride_a": [509, 1], "stride_b": [1, 509], "stride_bias": [0, 1]}',
                    help="the problem, as a JSON record problem (default: a training set's addmm)")  # fmt: skip
    ap.add_argument("--workers", default="1,8,15", help="comma-separated process counts (default 1,8,15)")
    ap.add_argument("--kernels", type=int, default=0,
                    help="kernels per setting (default: 12 per process, at least 24)")  # fmt: skip
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE[,NAME=VALUE]: a setting with this environment, besides the plain one; repeatable")  # fmt: skip
    ap.add_argument("--emulate", metavar="TARGET_JSON", help="compile for this target (precompile's emulation)")
    ap.add_argument("--output", help="write the results here (JSON)")
    args = ap.parse_args(argv)

    try:
        problem = Problem.from_dict(json.loads(args.problem))
        workers = [int(w) for w in args.workers.split(",") if w.strip()]
        envs: list[dict[str, str]] = [{}]
        for spec in args.env:
            envs.append(dict(kv.split("=", 1) for kv in spec.split(",")))
    except (ValueError, KeyError, TypeError) as e:
        ap.error(f"bad --problem, --workers or --env: {e}")
    if not workers or min(workers) < 1:
        ap.error("--workers: give positive process counts, e.g. 1,8,15")

    target = None
    if args.emulate:
        target = pc.Target.load(args.emulate)
        pc.emulate(target)  # the choices below depend on the GPU's shared memory: emulated too
        options, revision, smem = dict(target.compile_options), target.revision, target.shared_memory_limit
    else:
        options, revision = sweep.compile_options(), sweep.template_revision()
        with sweep.SweepCollector("bench", sweep.SweepOptions(workers=1)) as c:
            smem = c.shared_memory_limit()
    items = [it for it in sweep.inductor_choices(problem, "EXHAUSTIVE") if it.kind == "triton"]
    info = machine()
    print(json.dumps(info), flush=True)
    print(f"{problem.key()}: {len(items)} Triton choices", flush=True)
    rows = []
    for env in envs:
        for w in workers:
            n = args.kernels or max(24, 12 * w)
            # Spread over the whole space (its order groups similar configs); every setting has a
            # fresh cache and fresh processes, so none finds another's kernels.
            picked = [items[i * len(items) // n].choice for i in range(min(n, len(items)))]
            row = run_setting(problem, picked, w, env, target, options, revision, smem)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.output:
        Path(args.output).write_text(
            json.dumps({"machine": info, "problem": problem.to_dict(), "rows": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
