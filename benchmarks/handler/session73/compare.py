"""Session 73: the same problems' cold compiles in new processes (``vs_new.py``) and in one or more
one-process runs (``changed.py time``: session 73's with session 72's remedy, session 64's
without), problem by problem, and each method's figures on the problems both measured. A run's
files (its shards) are given comma-separated; problems a run did not measure whole are left out.

    python benchmarks/handler/session73/compare.py NEW.json NAME=ONE.json[,ONE2.json] [NAME=...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

VARIANTS = ("stock", "default")


def runs(paths: str) -> dict[str, dict[str, dict]]:
    """Problem key -> variant -> run, over the files of one run; problems without a whole run of
    each variant (a failed compile) are left out."""
    out: dict[str, dict[str, dict]] = {}
    for path in paths.split(","):
        for r in json.loads(Path(path).read_text())["rows"]:
            by = {x["variant"]: x for x in r["runs"]}
            if all(v in by and "compile_s" in by[v] and "kernel_us" in by[v] for v in VARIANTS):
                out[r["key"]] = by
    return out


def gm(v: list[float]) -> float:
    return float(np.exp(np.mean(np.log(v))))


def figures(t: dict[str, dict[str, dict]], keys: list[str]) -> str:
    med = {v: statistics.median(t[k][v]["compile_s"] for k in keys) for v in VARIANTS}
    ratio = gm([t[k]["default"]["kernel_us"] / t[k]["stock"]["kernel_us"] for k in keys])
    return (
        f"median compile stock {med['stock']:.2f} s, defaults {med['default']:.2f} s "
        f"({med['default'] / med['stock']:.3f}x); kernel defaults / stock geomean {ratio:.4f}"
    )


def main() -> int:
    new = runs(sys.argv[1])
    others = {name: runs(paths) for name, paths in (a.split("=", 1) for a in sys.argv[2:])}
    print(f"new processes: {len(new)} problems; {figures(new, list(new))}")
    for name, one in others.items():
        keys = [k for k in new if k in one]
        print(f"\n## {name}: {len(keys)} problems in both ({len(one)} in {name})\n")
        print(f"| problem | stock s new / {name} | defaults s new / {name} | defaults / stock kernel new / {name} |")
        print("|---|---|---|---|")
        for k in keys:
            n, o = new[k], one[k]
            print(
                f"| {k} | {n['stock']['compile_s']:.2f} / {o['stock']['compile_s']:.2f} | "
                f"{n['default']['compile_s']:.2f} / {o['default']['compile_s']:.2f} | "
                f"{n['default']['kernel_us'] / n['stock']['kernel_us']:.3f} / "
                f"{o['default']['kernel_us'] / o['stock']['kernel_us']:.3f} |"
            )
        print()
        print(f"new processes ({len(keys)}): {figures(new, keys)}")
        print(f"{name} ({len(keys)}): {figures(one, keys)}")
        print(f"{name}, all ({len(one)}): {figures(one, list(one))}")
        for v in VARIANTS:
            r = [one[k][v]["compile_s"] / new[k][v]["compile_s"] for k in keys]
            a = statistics.median(one[k][v]["compile_s"] for k in keys) / statistics.median(
                new[k][v]["compile_s"] for k in keys
            )
            print(
                f"{v}: {name} / new, ratio of medians {a:.3f}; per problem {min(r):.2f}-{max(r):.2f}, geomean {gm(r):.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
