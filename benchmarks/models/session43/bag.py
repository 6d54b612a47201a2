"""Seed bagging on a validation set: every model file's figures, then those of the mean of the
log predictions of every combination of two or more of them (the order as the handler makes it).

    python benchmarks/models/session43/bag.py data/KEY/val.msgpack data/KEY/val-stock-picks.json MODEL...
"""

import itertools
import sys

import numpy as np

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals, read_max_autotune_solution, summarize
from torch_diode.model import load_model

val, stockf, *models = sys.argv[1:]
ds = read_dataset(val)
stock = read_max_autotune_solution(stockf)
mcc = config.options().max_compile_cost
evs = []
for m in models:
    e = problem_evals(load_model(m), ds, stock=stock, max_compile_cost=mcc)
    s = summarize(e)["overall"]
    print(
        m,
        "r1 {:.4f} r5 {:.4f} vs-stock {}".format(
            s["regret@1"]["geomean"], s["regret@5"]["geomean"], s["vs_max_autotune"]
        ),
    )
    evs.append(e)


def rep(ix):
    out = []
    for j, e in enumerate(evs[0]):
        p = np.mean([evs[i][j].predicted_log_us for i in ix], axis=0)
        out.append(e.with_predictions(p))
    s = summarize(out)["overall"]
    print(
        "bag",
        ix,
        "r1 {:.4f} r5 {:.4f} p95r5 {:.3f} vs-stock {}".format(
            s["regret@1"]["geomean"], s["regret@5"]["geomean"], s["regret@5"]["p95"], s["vs_max_autotune"]
        ),
    )


for n in range(2, len(evs) + 1):
    for ix in itertools.combinations(range(len(evs)), n):
        rep(list(ix))
