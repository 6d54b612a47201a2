"""Session 62: the H200 file's top-1 / stock's pick with each of the session's stock picks, on all
the problems each covers and on the 154 that stock max-autotune's own run (rule 12) covers.

    python benchmarks/models/session62/subsets.py > benchmarks/models/session62/subsets-H200.txt

One line per stock file and subset: problems, geomean (95% bootstrap interval,
``evaluate.geomean_ci95``) and how many picks are no slower than stock's.
"""

from __future__ import annotations

import numpy as np
from stock_run import top1_over_stock

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import geomean_ci95, problem_evals, read_max_autotune_solution
from torch_diode.model import load_model

S62 = "benchmarks/models/session62"
STOCK = (
    ("derived", "data/NVIDIA-H200/val-stock-picks.json"),
    ("sweep run 1", "data/NVIDIA-H200/val-stock.msgpack"),
    ("sweep run 2", f"{S62}/val-stock-run2.msgpack"),
    ("inductor", f"{S62}/inductor-stock-H200.msgpack"),
)


def main() -> None:
    model = load_model("packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors")
    evals = {e.problem: e for e in problem_evals(model, read_dataset("data/NVIDIA-H200/val.msgpack"))}
    inductor = read_max_autotune_solution(STOCK[-1][1])
    for name, path in STOCK:
        picks = read_max_autotune_solution(path)
        for subset, keep in (("all", None), ("inductor154", set(inductor))):
            problems = [p for p in evals if keep is None or p in keep]
            r = top1_over_stock(evals, picks, problems)
            lo, hi = geomean_ci95(r)
            print(
                f"{name:12s} {subset:12s} n={len(r)} {np.exp(np.mean(np.log(r))):.4f} ({lo:.4f}-{hi:.4f}) "
                f"no slower {int((r <= 1).sum())}"
            )


if __name__ == "__main__":
    main()
