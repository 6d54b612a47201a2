"""Grouped cross-validation of the neighbour memory's options (k, bandwidth, prior weight).

The memory is applied at prediction time only, so each fold's model (``scripts/cv_model.py``'s
folds, default training options) is trained once and re-scored with every option set: exact,
and ~15x cheaper than training per set. Also scores one model per seed, trained on the whole
training file, on the validation file. Writes every figure to ``--json``.

Usage:
    python scripts/cv_neighbours.py --hardware NVIDIA-H100 --seeds 0 1 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from typing import Any

from cv_model import DEFAULT_COST, ROOT, fold_of_problems, headline

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals, read_max_autotune_solution, summarize
from torch_diode.neighbours import NeighbourOptions
from torch_diode.train import TrainOptions, train


def repredicted(model: Any, evals: list[Any]) -> list[Any]:
    """``evals`` with ``model``'s predictions as it predicts now (its memory's options as set)."""
    return [e.with_predictions(model.predict(e.problem, e.choices).log_time_us) for e in evals]


def regrets(evals: list[Any]) -> tuple[float, float]:
    """Geomean regret@1 and regret@5 (``torch_diode.evaluate.summarize``, as ``cv_model.py``)."""
    h = headline(summarize(evals, with_tau=False)["overall"])
    return h["r1"], h["r5"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--bandwidth", type=float, nargs="+", default=[2.0, 3.0, 4.5])
    ap.add_argument("--prior", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    data = ROOT / "data" / args.hardware
    ds = read_dataset(data / "train.msgpack")
    val = read_dataset(data / "val.msgpack")
    stock = read_max_autotune_solution(data / "val-stock-picks.json")
    problems = ds.measured_problems()
    grid = [NeighbourOptions(k=0)] + [
        NeighbourOptions(k=k, bandwidth=bw, prior_weight=pr)
        for k, bw, pr in itertools.product(args.k, args.bandwidth, args.prior)
    ]
    out: dict[str, Any] = {}
    t0 = time.time()
    for seed in args.seeds:
        opts = TrainOptions(num_threads=1, progress=False, seed=seed)
        folds = []
        for fold in fold_of_problems(ds, args.folds, seed):
            model, _ = train(ds.select_problems(problems - set(fold)), opts)
            folds.append((model, problem_evals(model, ds.select_problems(set(fold)), max_compile_cost=DEFAULT_COST)))
        full, _ = train(ds, opts)
        val_evals = problem_evals(full, val, stock=stock, max_compile_cost=DEFAULT_COST)
        for o in grid:
            cv: list[Any] = []
            for model, evals in folds:
                model.memory.options = o
                cv += repredicted(model, evals)
            full.memory.options = o
            (cv1, cv5), (v1, v5) = regrets(cv), regrets(repredicted(full, val_evals))
            key = f"{seed} {o.k} {o.bandwidth} {o.prior_weight}"
            out[key] = {"cv_r1": cv1, "cv_r5": cv5, "val_r1": v1, "val_r5": v5}
            print(key, {k: round(v, 4) for k, v in out[key].items()}, f"{time.time() - t0:.0f} s", flush=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
