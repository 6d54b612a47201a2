"""The ranking forest's LambdaRank hessians at its first tree, summed per training problem, against
the leaf regularisation ``l2`` (session 34, ``cv-session34.md`` section 3).

    python benchmarks/models/session34/hessians.py NVIDIA-H200
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from torch_diode.dataset import read_dataset
from torch_diode.features import gpu_constants
from torch_diode.forest import ForestOptions, _Padded, relevance_gains
from torch_diode.train import _featurize_problems


def main(key: str) -> None:
    torch.set_num_threads(1)
    ds = read_dataset(f"data/{key}/train.msgpack")
    rows = _featurize_problems(ds, ds.by_problem(), gpu_constants(key))
    o = ForestOptions()
    group, gains = relevance_gains(rows.y, rows.counts, o)  # as RankingForest.fit
    _, h = _Padded(rows.counts).lambdas(np.zeros(len(gains)), gains, o.top)
    per_problem = np.bincount(group, weights=h)
    q10, q50, q90 = np.quantile(per_problem, [0.1, 0.5, 0.9])
    print(
        f"{key}: {len(rows.counts)} problems, {len(gains)} rows; hessian per problem median {q50:.1f} "
        f"(10th-90th percentile {q10:.1f}-{q90:.1f}); one of 2**{o.depth} leaves' uniform share "
        f"{h.sum() / 2**o.depth:.0f}; l2 {o.l2}"
    )


if __name__ == "__main__":
    main(sys.argv[1])
