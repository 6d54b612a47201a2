"""The scale of a model file's ranking forest against its network (session 34): over each problem's
shortlist, the standard deviation of the forest's scores over that of the network's predicted log
times (after the neighbour memory and the ATen head), every 5th validation problem.

    python benchmarks/models/session34/stack_scale.py M.safetensors data/NVIDIA-H200/val.msgpack
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from cv_model import DEFAULT_COST

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals
from torch_diode.features import featurize_split_indexed
from torch_diode.model import load_model


def main(model_path: str, val_path: str) -> None:
    m = load_model(model_path)
    forest, m.forest = m.forest, None  # the network's (and memory's, head's) prediction alone
    if forest is None:
        raise SystemExit(f"{model_path}: no ranking forest")
    ratios = []
    for i, e in enumerate(problem_evals(m, read_dataset(val_path), max_compile_cost=DEFAULT_COST)):
        if i % 5:
            continue
        xs, xr, _ = featurize_split_indexed(e.problem, e.choices, m.gpu)
        short = np.argsort(e.predicted_log_us)[: forest.options.shortlist]
        ratios.append(np.std(forest.score_split(xs, xr[short])) / np.std(e.predicted_log_us[short]))
    q25, q50, q75 = np.quantile(ratios, [0.25, 0.5, 0.75])
    print(
        f"{len(ratios)} problems: forest score std / network log-time std, median {q50:.1f} (IQR {q25:.1f}-{q75:.1f})"
    )


if __name__ == "__main__":
    main(*sys.argv[1:3])
