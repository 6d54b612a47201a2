"""Session 59: is the top-1 gap on skinny problems a fit problem or a generalisation problem?

    python benchmarks/models/session59/insample.py MODEL DATA [DATA ...]

The model's top-1 pick against stock's pick (``active.py score``'s comparison, ``model_vs_stock``)
on the problems of training files the model was fit on, split by ``skinny.kind`` and, for skinny
problems, by the other output side (< 16,384 or >= 16,384). In-sample figures near 1 with the
validation set's skinny problems at ~1.1 would say the model can represent them and lacks data.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session58"))
from oos_skinny import grouped  # noqa: E402
from skinny import kind, long_side  # noqa: E402


def group(p) -> tuple[str]:
    if kind(p) is None:
        return ("others",)
    return (f"skinny, other side {'>=' if long_side(p) >= 16384 else '<'} 16384",)


def main() -> None:
    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.config import config
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    model = load_model(sys.argv[1])
    cost = config.options().max_compile_cost
    for f in sys.argv[2:]:
        ds = read_dataset(f)
        stock, _ = stock_picks_from_full_space(ds)
        groups = grouped(ds, stock, model, cost, group)
        for g in sorted(groups):
            v = np.array(groups[g])[:, 0]
            print(
                f"{f} {g}: {len(v)} problems, top-1 / stock {math.exp(v.mean()):.4f}, sum of logs {v.sum():+.3f}, no slower on {(v <= 0).sum()}"
            )


if __name__ == "__main__":
    main()
