"""Median time to load a model file (``torch_diode.model.load_model``: read, check every tensor and
the metadata, rebuild the neighbour memory, the ATen head and the ranking forest).

The choices handler pays it once per process, at its first GEMM lowering (and again only when
another model is installed); the handler check on a GPU (``scripts/check_handler_gpu.py``)
installs the handler for each compile, so it pays it in every per-GEMM compile time it reports.

Usage: python scripts/bench_model_load.py [MODEL ...] [--repeat 7] [--json]
MODEL: a model file or a registered name (default: every model torch_diode_models ships).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from torch_diode.bench.measure import cpu_model
from torch_diode.model import load_model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", metavar="MODEL")
    ap.add_argument("--repeat", type=int, default=7, help="timed loads per model, after one untimed (default: 7)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat must be >= 1, got {args.repeat}")
    from torch_diode.registry import resolve

    names = args.models
    if not names:
        import torch_diode_models

        names = [m.name for m in torch_diode_models.list_available_models()]
    paths = [str(resolve(n)) for n in names]
    rows = []
    for path in paths:
        load_model(path)  # untimed: the file in the page cache, imports done
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            load_model(path)
            times.append(time.perf_counter() - t0)
        rows.append(
            {"model": path, "median_ms": round(1e3 * statistics.median(times), 2), "min_ms": round(1e3 * min(times), 2)}
        )
    env = {
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if args.json:
        print(json.dumps({"environment": env, "loads": rows}, indent=1))
    else:
        print(f"{env}")
        for r in rows:
            print(f"{r['model']}: median {r['median_ms']:.1f} ms (min {r['min_ms']:.1f} ms) over {args.repeat} loads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
