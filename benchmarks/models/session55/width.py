"""Session 55: the top-1 pick on OOS problems of several networks of one seed, on the problems
where every network's pick was measured (``session54/screen.py``'s OOS figure counts a problem
only where that model's top-1 pick was measured, so two models' figures cover different problems).

    python benchmarks/models/session55/width.py KEY OOS --seeds 0 1 2 \
        --variant tw=DIR/s54-{tag}-val-s{seed}-tw.safetensors --variant h96=DIR/s55-{tag}-val-s{seed}-h96.safetensors

Each model gets its seed's ranking forest and, on the H200, the shipped file's neighbour memory
(``session53/expectile.put_in``), as ``screen.py`` scores it. One line per seed (each variant's OOS
top-1 / stock on the common problems) and the means over seeds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session44", "session50", "session51", "session52", "session53", "session54"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from call_study import oos_items, oos_log_ratios  # noqa: E402
from compare import on_common_problems  # noqa: E402
from expectile import TAG, put_in  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("key", choices=sorted(TAG))
    ap.add_argument("oos", help="the OOS dataset, relative to the repository root")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--variant", action="append", required=True, help="NAME=PATH ({tag} and {seed} filled in)")
    a = ap.parse_args()
    from torch_diode.model import load_model

    variants = [v.split("=", 1) for v in a.variant]
    items = oos_items(a.oos)
    means: dict[str, list[float]] = {name: [] for name, _ in variants}
    for seed in a.seeds:
        rows = []
        for _, path in variants:
            model = put_in(a.key, seed, load_model(path.format(tag=TAG[a.key], seed=seed)))
            rows.append(oos_log_ratios(model, items))
        n, geomeans = on_common_problems(rows)
        for (name, _), g in zip(variants, geomeans):
            means[name].append(g)
        figs = ", ".join(f"{name} {g:.4f}" for (name, _), g in zip(variants, geomeans))
        print(f"{a.key} seed {seed}: OOS top-1 / stock on {n} common problems: {figs}", flush=True)
    print(f"{a.key} means over seeds {a.seeds}: " + ", ".join(f"{n} {np.mean(v):.4f}" for n, v in means.items()))


if __name__ == "__main__":
    main()
