"""Session 73: the same problems' cold compiles in new processes (``vs_new.py``) and in one process
(``changed.py time``, session 72's remedy), problem by problem, and each method's figures.

    python benchmarks/handler/session73/compare.py NEW.json ONE.json
"""

from __future__ import annotations

import json
import statistics
import sys

import numpy as np


def runs(path: str) -> dict[str, dict[str, dict]]:
    return {r["key"]: {x["variant"]: x for x in r["runs"]} for r in json.loads(open(path).read())["rows"]}


def gm(v: list[float]) -> float:
    return float(np.exp(np.mean(np.log(v))))


def main() -> int:
    new, one = runs(sys.argv[1]), runs(sys.argv[2])
    keys = [k for k in new if k in one]
    print(f"{len(keys)} problems in both ({len(new)} in new processes, {len(one)} in one process)\n")
    print("| problem | stock s new / one | defaults s new / one | defaults / stock kernel new / one |")
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
    for name, t, ks in (("new processes", new, keys), ("one process", one, keys), ("one process, all", one, list(one))):
        med = {v: statistics.median(t[k][v]["compile_s"] for k in ks) for v in ("stock", "default")}
        ratio = gm([t[k]["default"]["kernel_us"] / t[k]["stock"]["kernel_us"] for k in ks])
        print(
            f"{name} ({len(ks)}): median compile stock {med['stock']:.2f} s, defaults {med['default']:.2f} s "
            f"({med['default'] / med['stock']:.3f}x); kernel defaults / stock geomean {ratio:.4f}"
        )
    for v in ("stock", "default"):
        r = [one[k][v]["compile_s"] / new[k][v]["compile_s"] for k in keys]
        a = statistics.median(one[k][v]["compile_s"] for k in keys) / statistics.median(
            new[k][v]["compile_s"] for k in keys
        )
        print(f"{v}: one / new, ratio of medians {a:.3f}; per problem {min(r):.2f}-{max(r):.2f}, geomean {gm(r):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
