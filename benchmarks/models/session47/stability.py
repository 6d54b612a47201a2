"""Where the top-1 gap to stock's pick sits across seeds (session 47).

Reads the per-problem rows of several ``cv_jobs.py`` validation runs of one configuration (seeds),
and splits the validation problems into *stable* ones (every seed's top-1 pick within ``--tol``
of the others' in measured time) and the rest; for each part: the top-1 pick's regret (geomean over
problems of the seeds' mean log-regret), stock max-autotune's, the points (100 x summed log) the
model's pick is behind stock's, and how often the pick is ATen. Also the best and worst seed per
problem (an oracle picking the seed, not a method). With ``--val`` (the runs' validation dataset):
on the problems every seed gives to ATen, how far the best measured Triton config is from ATen,
and the ones where it is over 5% faster.

Usage: python benchmarks/models/session47/stability.py RUN.json [RUN.json ...] [--tol 0.01] [--val VAL.msgpack]
(``RUN.json``: ``cv_jobs.py --out DIR``'s ``DIR/<job id>.json`` of ``part: val`` jobs)
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from torch_diode.dataset import read_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--tol", type=float, default=0.01, help="log-time spread of a stable problem's picks")
    ap.add_argument("--val", help="the validation dataset the runs ranked (for the always-ATen problems' details)")
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
    if args.val:
        always_aten(args.val, problems, stable & aten.all(axis=0), mean, log_stock)


def always_aten(val: str, problems: list[str], mask: np.ndarray, mean: np.ndarray, log_stock: np.ndarray) -> None:
    """ATen against the best measured Triton config on the problems of ``mask`` (points: 100 x log)."""
    ds = read_dataset(val)
    groups = {json.dumps(g.problem.to_dict(), sort_keys=True): g for g in ds.by_problem()}
    rows = []
    for i in np.flatnonzero(mask):
        times = groups[problems[i]].median_by_choice()
        aten = min(t for c, t in times.items() if ds.choices[c].is_aten)
        triton = min(t for c, t in times.items() if not ds.choices[c].is_aten)
        rows.append((100 * math.log(aten / triton), 100 * mean[i], 100 * log_stock[i], problems[i]))
    gaps = np.array([r[0] for r in rows])
    big = sorted((r for r in rows if r[0] > 5), reverse=True)
    print(
        f"always ATen: {len(rows)} problems, ATen fastest on {(gaps <= 0).sum()}, a Triton config over 5% faster on "
        f"{len(big)}; points behind the winner: the model {sum(r[1] for r in rows):.0f}, stock {sum(r[2] for r in rows):.0f}; "
        f"on those {len(big)}: the model {sum(r[1] for r in big):.0f}, stock {sum(r[2] for r in big):.0f}"
    )
    for gap, model, stock, p in big:
        print(f"  ATen {gap:5.1f} points over the best Triton config; model {model:5.1f}, stock {stock:5.1f}  {p}")


if __name__ == "__main__":
    main()
