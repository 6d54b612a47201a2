"""Where the top-1 gap to stock's pick sits across seeds (session 47).

Reads the per-problem rows of several ``cv_jobs.py`` validation runs of one configuration (seeds),
and splits the validation problems into *stable* ones (every seed's top-1 pick within ``--tol``
of the others' in measured time) and the rest; for each part: the top-1 pick's regret (geomean over
problems of the seeds' mean log-regret), stock max-autotune's, the points (100 x summed log) the
model's pick is behind stock's, and how often the pick is ATen. Also the best and worst seed per
problem (an oracle picking the seed, not a method).

Usage: python benchmarks/models/session47/stability.py RUN.json [RUN.json ...] [--tol 0.01]
(``RUN.json``: ``cv_jobs.py --out DIR``'s ``DIR/<job id>.json`` of ``part: val`` jobs)
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--tol", type=float, default=0.01, help="log-time spread of a stable problem's picks")
    args = ap.parse_args()
    runs = [{r["p"]: r for r in json.load(open(f))["rows"]} for f in args.runs]
    problems = sorted(runs[0])
    if any(set(r) != set(problems) for r in runs):
        raise SystemExit("the runs rank different problems: give runs of one validation set")
    log_r1 = np.array([[math.log(r[p]["r1"]) for p in problems] for r in runs])  # [seeds, problems]
    log_stock = np.array([math.log(runs[0][p]["stock"]) for p in problems])
    aten = np.array([[bool(r[p]["aten_pick"]) for p in problems] for r in runs])
    mean = log_r1.mean(axis=0)
    stable = log_r1.max(axis=0) - log_r1.min(axis=0) <= args.tol
    print(
        f"{len(runs)} runs, {len(problems)} problems; per run regret@1 "
        + ", ".join(f"{math.exp(x):.4f}" for x in log_r1.mean(axis=1))
    )
    print(
        f"seeds' mean {math.exp(mean.mean()):.4f}, best seed per problem {math.exp(log_r1.min(axis=0).mean()):.4f}, "
        f"worst {math.exp(log_r1.max(axis=0).mean()):.4f}, stock {math.exp(log_stock.mean()):.4f}"
    )
    parts = {
        "stable": stable,
        "  of which always ATen": stable & aten.all(axis=0),
        "  of which never ATen": stable & ~aten.any(axis=0),
        "unstable": ~stable,
        "all": np.ones_like(stable),
    }
    print(f"{'part':24s} {'n':>4s} {'top-1':>7s} {'stock':>7s} {'ratio':>7s} {'points':>7s} {'ATen picks':>10s}")
    for name, m in parts.items():
        if not m.any():
            continue
        gap = mean[m] - log_stock[m]
        print(
            f"{name:24s} {m.sum():4d} {math.exp(mean[m].mean()):7.4f} {math.exp(log_stock[m].mean()):7.4f} "
            f"{math.exp(gap.mean()):7.4f} {100 * gap.sum():7.0f} {aten[:, m].mean():10.2f}"
        )


if __name__ == "__main__":
    main()
