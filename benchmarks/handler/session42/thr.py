"""Offline: the handler's keep at several confidence thresholds on a dataset (val): mean kept,
single-choice share, low-confidence share, geomean of the best kept over the best measured.
usage: python thr.py MODEL DATASET [thr ...]"""

import math
import sys

import numpy as np
from _keep import Scored

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.model import load_model

model = load_model(sys.argv[1])
ds = read_dataset(sys.argv[2])
thrs = [float(x) for x in sys.argv[3:]] or [0.0, 0.6, 0.7, 0.75, 0.8, 0.85]
import os  # noqa: E402

opts = config.options().replace(top_k_configs=int(os.environ.get("TOPK", "3")))
res = {t: [] for t in thrs}
for pt in ds.by_problem():
    sc = Scored(model, ds, pt, opts)
    for thr in thrs:
        sel, kept, loss = sc.keep(opts.replace(confidence_threshold=thr))
        res[thr].append((len(kept), not sel.confident, loss))
for thr, r in res.items():
    r = np.array(r, dtype=float)
    print(
        f"thr {thr:.2f}: kept {r[:, 0].mean():.2f}  single {int((r[:, 0] == 1).sum()):3d}  low {int(r[:, 1].sum()):3d}  best-kept {math.exp(r[:, 2].mean()):.4f}  p95 {math.exp(np.percentile(r[:, 2], 95)):.3f}"
    )
