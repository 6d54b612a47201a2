"""Session 24's diagnostic: would a learned ATen-or-Triton decision beat the model's own argmin?

For one GPU: 3-fold grouped out-of-fold predictions on the training problems (``cv_model.py``'s
folds, seed 0, the trainer's defaults on 2 threads), a gradient-boosted model (scikit-learn) fit
on them to predict log(time of the model's best Triton pick / time of ATen) from the predicted
gaps and the problem's sizes, op and dtype, and the resulting top-1 picks scored on
``val.msgpack`` with the preview model (trained on the whole training file, seed 0) against the
model's own argmin and the oracle decision. Not a tuning: the figures go into ``cv-session24.md``.

    python benchmarks/models/aten_decision_session24.py NVIDIA-H200 [MODEL.safetensors]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from cv_model import fold_of_problems  # noqa: E402

from torch_diode.dataset import read_dataset  # noqa: E402
from torch_diode.evaluate import problem_evals, read_max_autotune_solution, summarize  # noqa: E402
from torch_diode.model import load_model  # noqa: E402
from torch_diode.train import TrainOptions, train  # noqa: E402

DT = {"float16": 0, "bfloat16": 1, "float32": 2}
OP = {"mm": 0, "addmm": 1, "bmm": 2, "baddbmm": 3}


def row(e):
    """Decision features and target of one problem's evaluation; the two candidates' indices."""
    isa = np.array([not c.is_triton for c in e.choices])
    p = e.predicted_log_us
    tp = np.sort(p[~isa])
    pr = e.problem
    x = [p[isa].min() - tp[0], tp[1] - tp[0], tp[min(4, len(tp) - 1)] - tp[0], tp[0],
         np.log(pr.m), np.log(pr.n), np.log(pr.k), np.log(getattr(pr, "batch", 1) or 1),
         DT.get(str(pr.dtype).replace("torch.", ""), 3), OP.get(pr.op, 4), len(tp)]  # fmt: skip
    ti = np.where(~isa)[0][np.argmin(p[~isa])]
    ai = np.where(isa)[0][np.argmin(p[isa])]
    return x, np.log(e.measured_us[ti] / e.measured_us[ai]), (ti, ai)


def table(evals):
    rows = [row(e) for e in evals]
    return np.array([r[0] for r in rows], float), np.array([r[1] for r in rows]), [r[2] for r in rows]


def score(evals, idx, pick_aten):
    """``diode validate-max-autotune``'s figures (``summarize``) with each problem's top-1 pick
    forced to ATen or to the model's best Triton config, as the decision says."""
    forced = []
    for e, (ti, ai), a in zip(evals, idx, pick_aten):
        p = e.predicted_log_us.copy()
        p[ai if a else ti] = -np.inf
        forced.append(replace(e, predicted_log_us=p))
    o = summarize(forced, with_tau=False)["overall"]
    return (
        f"regret@1 {o['regret@1']['geomean']:.4f}, vs stock {o['vs_max_autotune']['geomean']:.4f}, "
        f"ATen picked on {int(np.sum(pick_aten))}"
    )


def main() -> None:
    key = sys.argv[1]
    data = ROOT / "data" / key
    ds = read_dataset(data / "train.msgpack")
    problems = ds.measured_problems()
    oof = []
    for fold in fold_of_problems(ds, 3, 0):
        model, _ = train(ds.select_problems(problems - set(fold)), TrainOptions(seed=0, num_threads=2, progress=False))
        oof += problem_evals(model, ds.select_problems(set(fold)))
    if len(sys.argv) > 2:
        full = load_model(sys.argv[2])
    else:
        full, _ = train(ds, TrainOptions(seed=0, num_threads=2, progress=False, val_fraction=0.0))
    val = problem_evals(
        full, read_dataset(data / "val.msgpack"), stock=read_max_autotune_solution(data / "val-stock-picks.json")
    )
    x, y, _ = table(oof)
    xv, yv, iv = table(val)
    print(
        f"{key}: {len(y)} training problems out of fold, ATen faster than the model's Triton pick on {(y > 0).mean():.3f}"
    )
    print(f"  the model's argmin:   {score(val, iv, xv[:, 0] < 0)}")
    print(f"  the oracle decision:  {score(val, iv, yv > 0)}")
    for seed in (0, 1, 2):
        reg = GradientBoostingRegressor(
            n_estimators=200, max_depth=3, learning_rate=0.05, subsample=0.8, random_state=seed, loss="huber"
        ).fit(x, y)
        print(f"  regressor, seed {seed}:  {score(val, iv, reg.predict(xv) > 0)}")
        clf = GradientBoostingClassifier(
            n_estimators=200, max_depth=3, learning_rate=0.05, subsample=0.8, random_state=seed
        ).fit(x, y > 0, sample_weight=np.abs(y) + 1e-3)
        print(f"  classifier, seed {seed}: {score(val, iv, clf.predict(xv))}")


if __name__ == "__main__":
    main()
