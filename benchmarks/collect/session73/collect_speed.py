"""Session 73: does the Inductor collector compile each kernel twice? One process, one
``InductorCollector`` over the first N problems of session 63's seeded sample of H200 validation
problems (``benchmarks/handler/session63/sample-H200.json``), timing each ``measure()`` and counting
``make_cubin`` (ptxas) calls per thread (``session71/compile_method.py``). ``old`` adds Inductor's
``force_disable_caches=True`` to each compile, as the collector did until session 73 (each graph
compiled in a new cache folder of its own, away from the compile workers'); ``new`` is the
collector as it is (one set of folders for the collection, the workers started in them);
``new-nocg`` is ``new`` with ``mode="max-autotune-no-cudagraphs"`` (the measuring tools' mode).
``PICK``: the sample's problems at these indices (0-based) instead of its first N.

    python benchmarks/collect/session73/collect_speed.py {new|old|new-nocg} N SEARCH_SPACE OUT.json [PICK]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "handler" / "session71"))

import compile_method as cm  # noqa: E402


def main() -> int:
    variant, n, space, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    assert variant in ("new", "old", "new-nocg"), variant
    from torch_diode._files import atomic_write
    from torch_diode.bench.measure import environment
    from torch_diode.collect.inductor import InductorCollector
    from torch_diode.records import Problem

    sample = json.loads((ROOT / "benchmarks/handler/session63/sample-H200.json").read_text())["problems"]
    listed = [sample[int(i)] for i in sys.argv[5].split(",")] if len(sys.argv) > 5 else sample[:n]
    mode = "max-autotune-no-cudagraphs" if variant == "new-nocg" else "max-autotune"
    cm.count_cubins()
    overrides = {"force_disable_caches": True} if variant == "old" else None
    result = {"environment": environment(), "variant": variant, "search_space": space, "mode": mode, "rows": []}
    t_all = time.perf_counter()
    with InductorCollector(hardware="NVIDIA-H200", search_space=space, mode=mode, config_overrides=overrides) as c:
        for entry in listed:
            p = Problem.from_dict(entry["problem"])
            before = dict(cm.CUBINS)
            t0 = time.perf_counter()
            records, failures = c.measure(p)
            s = time.perf_counter() - t0
            best = min(records, key=lambda r: r.time_us) if records else None
            row = {
                "problem": p.key(),
                "measure_s": round(s, 3),
                "records": len(records),
                "failures": len(failures),
                "best": best.choice.key() if best else None,
                "best_us": round(best.time_us, 3) if best else None,
                "cubins": {k: cm.CUBINS[k] - before.get(k, 0) for k in cm.CUBINS},
            }
            result["rows"].append(row)
            result["total_s"] = round(time.perf_counter() - t_all, 2)
            atomic_write(out, json.dumps(result, indent=1))
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
