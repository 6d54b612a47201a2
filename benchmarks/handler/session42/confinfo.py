import math
import sys

import numpy as np
from _keep import Scored

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.model import load_model

ds = read_dataset(sys.argv[2])
opts = config.options()
for mp in sys.argv[3:] or [sys.argv[1]]:
    model = load_model(mp)
    rows = []
    for pt in ds.by_problem():
        sc = Scored(model, ds, pt, opts)
        b = int(np.argmin(sc.log))
        r = {}
        for name, thr in (("nowiden", 0.0), ("default", opts.confidence_threshold)):
            _, kept, loss = sc.keep(opts.replace(confidence_threshold=thr))
            r[name] = (len(kept), loss)
        rows.append((math.exp(-sc.std[b]), math.log(sc.measured[b] / sc.measured.min()), *r["nowiden"], *r["default"]))
    R = np.array(rows)
    low = R[:, 0] < opts.confidence_threshold
    for nm, m in (("conf<thr", low), ("conf>=thr", ~low)):
        print(
            f"{mp.split('/')[-1]:32s} {nm:9s} n {int(m.sum()):3d} top1 {math.exp(R[m, 1].mean()):.4f} kept(no widen) {R[m, 2].mean():.2f} {math.exp(R[m, 3].mean()):.4f}  kept(default) {R[m, 4].mean():.2f} {math.exp(R[m, 5].mean()):.4f}"
        )
    q = np.quantile(R[:, 0], [0.25, 0.5, 0.75])
    print(
        "   conf quartiles",
        np.round(q, 3),
        " spearman(conf, top1 regret)",
        round(float(np.corrcoef(np.argsort(np.argsort(R[:, 0])), np.argsort(np.argsort(R[:, 1])))[0, 1]), 3),
    )
