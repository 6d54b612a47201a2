"""Session 58: model files on skinny problems they may not have seen (``train-skinny.msgpack`` or a
half of it), split by kind (N <= 16; M <= 16 with A column-major) and op.

    python benchmarks/models/session58/oos_skinny.py DATA NAME=FILE [NAME=FILE ...]

Per file and group: the geomean of the model's top-1 pick (its order over ATen and the whole
EXHAUSTIVE space at the handler's compile cost) over stock max-autotune's pick (the fastest of
Inductor's DEFAULT candidates and ATen in the same timings; every problem here holds its whole
space), the problems no slower than stock, and the top-1 regret over the fastest measured choice.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session44"))
sys.path.insert(0, str(ROOT / "benchmarks/models/session58"))
from active import model_vs_stock  # noqa: E402
from skinny import kind  # noqa: E402


def grouped(ds, stock: dict, model, cost, keys) -> dict:
    """Per group (``keys(problem)``: the groups a problem belongs to), the problems' (log top-1 /
    stock, log top-1 regret) pairs; problems whose top-1 pick has no measured time are left out
    (a config that failed to compile or run)."""
    groups: dict = defaultdict(list)
    for p, med, order, stock_us in model_vs_stock(ds, stock, model, cost):
        top = order[0]
        if top not in med:
            continue
        r = (math.log(med[top] / stock_us), math.log(med[top] / min(med.values())))
        for g in keys(p):
            groups[g].append(r)
    return groups


def by_kind_and_op(p) -> tuple[str, ...]:
    k = kind(p)
    return ("all", k, f"{k} {p.op}")


def main() -> None:
    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.config import config
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    ds = read_dataset(sys.argv[1])
    stock, _ = stock_picks_from_full_space(ds)
    cost = config.options().max_compile_cost
    for arg in sys.argv[2:]:
        name, f = arg.split("=", 1)
        groups = grouped(ds, stock, load_model(f), cost, by_kind_and_op)
        for g in sorted(groups, key=lambda g: (g != "all", g)):
            v = np.array(groups[g])
            print(
                f"{name:12s} {g:22s} {len(v):4d} problems: top-1 / stock {math.exp(v[:, 0].mean()):.4f}, "
                f"no slower on {int((v[:, 0] <= 0).sum())}, regret@1 {math.exp(v[:, 1].mean()):.4f}"
            )


if __name__ == "__main__":
    main()
