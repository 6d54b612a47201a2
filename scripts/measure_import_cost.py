"""Measure what ``import torch_diode`` costs on top of ``import torch``.

Each run is a fresh interpreter that imports torch, then times ``import torch_diode`` with
``time.perf_counter`` (so torch's own import, which dominates, is not counted). Prints the median,
min and max over the runs, the median of ``import torch`` for scale, and which plugins were active.

    python scripts/measure_import_cost.py            # the torch_diode this interpreter imports
    python scripts/measure_import_cost.py --source   # the working tree's packages/*/src
    python scripts/measure_import_cost.py --runs 21 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE_DIRS = [REPO / "packages" / name / "src" for name in ("torch-diode-lib", "torch-diode-models", "torch-diode")]

_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
before = {m for m in sys.modules if m.startswith("torch._inductor")}
import {module}
t2 = time.perf_counter()
after = {m for m in sys.modules if m.startswith("torch._inductor")}
from importlib.metadata import entry_points
print(json.dumps({
    "torch_s": t1 - t0,
    "module_s": t2 - t1,
    "new_inductor_modules": len(after - before),
    "file": {module}.__file__,
    "plugins": sorted(ep.value for ep in entry_points(group="torch_diode.plugins")),
}))
"""


def measure_once(module: str, env: dict[str, str]) -> dict[str, object]:
    probe = _PROBE.replace("{module}", module)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(
            f"measure_import_cost: `import {module}` failed in a fresh interpreter:\n{proc.stderr.strip()}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11, help="fresh interpreters to time (default 11)")
    parser.add_argument("--module", default="torch_diode", help="module to import after torch (default torch_diode)")
    parser.add_argument("--source", action="store_true", help="import from the working tree's packages/*/src")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")

    env = dict(os.environ)
    if args.source:
        env["PYTHONPATH"] = os.pathsep.join([*map(str, SOURCE_DIRS), *filter(None, [env.get("PYTHONPATH")])])
    measure_once(args.module, env)  # warm the OS file cache; not counted
    runs = [measure_once(args.module, env) for _ in range(args.runs)]
    module_ms = sorted(float(r["module_s"]) * 1e3 for r in runs)  # type: ignore[arg-type]
    torch_ms = statistics.median(float(r["torch_s"]) * 1e3 for r in runs)  # type: ignore[arg-type]
    result = {
        "module": args.module,
        "file": runs[0]["file"],
        "runs": args.runs,
        "median_ms": round(statistics.median(module_ms), 2),
        "min_ms": round(module_ms[0], 2),
        "max_ms": round(module_ms[-1], 2),
        "torch_median_ms": round(torch_ms, 1),
        "new_inductor_modules": max(int(r["new_inductor_modules"]) for r in runs),  # type: ignore[call-overload]
        "plugins": runs[0]["plugins"],
        "python": sys.version.split()[0],
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"import {args.module} on top of import torch: median {result['median_ms']} ms "
            f"(min {result['min_ms']}, max {result['max_ms']}, {args.runs} fresh interpreters; "
            f"import torch itself: median {result['torch_median_ms']} ms)"
        )
        print(f"  from {result['file']}")
        print(
            f"  torch._inductor modules it added: {result['new_inductor_modules']}; plugins: {result['plugins'] or 'none'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
