"""Size and load time of a realistic 1,000,000-record dataset in msgpack (issue 2's requirement:
under 30 MB on disk and under 5 s to load on one CPU core).

The dataset imitates an exhaustive sweep: ~3,000 GEMM problems (mm/addmm/bmm, fp16/bf16/fp32,
sizes log-uniform in 16..16384, row/col layouts) times ~330 Triton configs plus ATen, float64
times, some repeated measurements. Each load runs in a fresh process (pinned to CPU 0 with
``taskset -c 0`` when available) and the median of ``--repeats`` loads is reported.

    python scripts/bench_dataset_io.py [--records 1000000] [--out DIR] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from torch_diode.dataset import Dataset, read_dataset, write_dataset
from torch_diode.records import Choice, Problem, Provenance


def triton_configs() -> list[Choice]:
    """~330 distinct Triton mm configs (block sizes x stages x warps x group)."""
    out = []
    for bm, bn, bk, stages, warps, group in itertools.product(
        (16, 32, 64, 128, 256), (16, 32, 64, 128, 256), (32, 64, 128), (2, 3, 4, 5), (4, 8), (8,)
    ):
        if bm * bn > 128 * 256 or (bm * bn >= 128 * 128 and warps == 4):
            continue
        out.append(
            Choice(
                template="triton::mm", block_m=bm, block_n=bn, block_k=bk, group_m=group, num_stages=stages,
                num_warps=warps, even_k=True, allow_tf32=False, use_fast_accum=False, acc_type="tl.float32",
            )
        )  # fmt: skip
    return out


def build(n_records: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    choices = [Choice.aten("mm"), *triton_configs()[:329]]
    per_problem = len(choices)
    n_problems = max(1, round(n_records / (per_problem * 1.01)))
    problems: list[Problem] = []
    seen = set()
    while len(problems) < n_problems:
        op = rng.choice(["mm", "addmm", "bmm"], p=[0.6, 0.2, 0.2])
        m, n, k = (int(2 ** rng.uniform(4, 14)) // 8 * 8 or 8 for _ in range(3))
        batch = int(rng.integers(2, 64)) if op == "bmm" else 1
        dtype = str(rng.choice(["float16", "bfloat16", "float32"]))
        col_b = bool(rng.random() < 0.3)
        stride_b = ((k * n,) if op == "bmm" else ()) + ((1, k) if col_b else (n, 1))
        p = Problem(op=str(op), m=m, n=n, k=k, batch=batch, dtype=dtype, stride_b=stride_b)
        if p not in seen:
            seen.add(p)
            problems.append(p)
    # Every problem measures every choice once; the remaining records repeat random measurements.
    pidx = np.repeat(np.arange(n_problems, dtype=np.int32), per_problem)
    cidx = np.tile(np.arange(per_problem, dtype=np.int32), n_problems)
    extra = n_records - len(pidx)
    if extra > 0:
        pick = rng.integers(0, len(pidx), extra)
        pidx, cidx = np.concatenate([pidx, pidx[pick]]), np.concatenate([cidx, cidx[pick]])
    pidx, cidx = pidx[:n_records], cidx[:n_records]
    flops = np.array([p.flops for p in problems], dtype=np.float64)
    base = flops[pidx] / 400e6  # µs at ~400 TFLOP/s
    time_us = (base + 3.0) * rng.lognormal(0.3, 0.4, len(pidx))  # float64, full-precision mantissas
    return Dataset(
        sources=[Provenance(hardware="NVIDIA-H100", gpu_name="NVIDIA H100 80GB HBM3", collector="sweep", seed=seed)],
        problems=problems,
        choices=choices,
        problem_idx=pidx,
        choice_idx=cidx,
        time_us=time_us,
        source_idx=np.zeros(len(pidx), dtype=np.uint16),
    )


_LOAD = (
    "import time, sys\n"
    "t0 = time.perf_counter()\n"
    "from torch_diode.dataset import read_dataset\n"
    "t1 = time.perf_counter()\n"
    "ds = read_dataset(sys.argv[1])\n"
    "t2 = time.perf_counter()\n"
    "print(len(ds), t1 - t0, t2 - t1)\n"
)


def load_in_fresh_process(path: Path) -> tuple[int, float, float]:
    cmd = [sys.executable, "-c", _LOAD, str(path)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout.split()
    return int(out[0]), float(out[1]), float(out[2])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="directory for the file (default: a temp dir, removed)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()

    tmp = None if args.out else tempfile.TemporaryDirectory()
    out_dir = args.out or Path(tmp.name)  # type: ignore[union-attr]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "bench-1m.msgpack"

    t = time.perf_counter()
    ds = build(args.records)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    write_dataset(ds, path)
    write_s = time.perf_counter() - t
    size = path.stat().st_size
    loads = [load_in_fresh_process(path) for _ in range(args.repeats)]
    assert all(n == len(ds) for n, _, _ in loads)
    check = read_dataset(path)
    exact = bool(np.array_equal(check.time_us, ds.time_us) and check.problems == ds.problems)
    load_s_median = statistics.median(x for _, _, x in loads)
    res = {
        "records": len(ds),
        "problems": len(ds.problems),
        "choices": len(ds.choices),
        "size_bytes": size,
        "size_mb": size / 1e6,
        "build_s": build_s,
        "write_s": write_s,
        "import_s_median": statistics.median(i for _, i, _ in loads),
        "load_s": [round(x, 3) for _, _, x in loads],
        "load_s_median": load_s_median,
        "pinned_to_cpu0": bool(shutil.which("taskset")),
        "round_trip_exact": exact,
        "ok": size < 30e6 and load_s_median < 5.0 and exact,
    }
    if tmp is not None:
        tmp.cleanup()
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(
            f"{res['records']} records ({res['problems']} problems x {res['choices']} choices): "
            f"{res['size_mb']:.1f} MB msgpack; load {res['load_s_median']:.2f} s median of {res['load_s']} "
            f"(+{res['import_s_median']:.2f} s import) on one core{'' if res['pinned_to_cpu0'] else ' (no taskset)'}; "
            f"write {res['write_s']:.2f} s; exact round trip: {exact}; "
            f"{'OK' if res['ok'] else 'FAILS'} (limits: 30 MB, 5 s)"
        )
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
