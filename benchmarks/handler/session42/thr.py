"""Offline: the handler's keep at several confidence thresholds on a dataset (val): mean kept,
single-choice share, low-confidence share, geomean of the best kept over the best measured.
usage: python thr.py MODEL DATASET [thr ...]"""

import math
import sys

import numpy as np

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.inductor.choices import select
from torch_diode.model import load_model
from torch_diode.ranking import aten_variant_call_trusted, order_of

model = load_model(sys.argv[1])
ds = read_dataset(sys.argv[2])
thrs = [float(x) for x in sys.argv[3:]] or [0.0, 0.6, 0.7, 0.75, 0.8, 0.85]
import os  # noqa: E402

opts = config.options().replace(top_k_configs=int(os.environ.get("TOPK", "3")))
res = {t: [] for t in thrs}
for pt in ds.by_problem():
    med = pt.median_by_choice()
    ids = list(med)
    ch = [ds.choices[c] for c in ids]
    tm = np.array([med[c] for c in ids])
    pred = model.predict(pt.problem, ch)
    lt = np.asarray(pred.log_time_us, dtype=np.float64)
    sd = np.asarray(pred.std, dtype=np.float64)
    aten = np.array([c.is_aten for c in ch])
    t, a = np.flatnonzero(~aten), np.flatnonzero(aten)
    order = order_of(pt.problem, [ch[i] for i in t], lt[t], diversity=opts.diversity, cliff_guard=opts.cliff_guard)
    for thr in thrs:
        sel = select(
            lt[t],
            sd[t],
            lt[a],
            sd[a],
            opts.replace(confidence_threshold=thr),
            keep_one_triton=len(a) == 0,
            triton_order=order,
            drop_slower_aten=aten_variant_call_trusted(pt.problem),
        )
        kept = [t[i] for i in sel.triton] + [a[i] for i in sel.aten]
        res[thr].append((len(kept), not sel.confident, math.log(tm[kept].min() / tm.min())))
for thr, r in res.items():
    r = np.array(r, dtype=float)
    print(
        f"thr {thr:.2f}: kept {r[:, 0].mean():.2f}  single {int((r[:, 0] == 1).sum()):3d}  low {int(r[:, 1].sum()):3d}  best-kept {math.exp(r[:, 2].mean()):.4f}  p95 {math.exp(np.percentile(r[:, 2], 95)):.3f}"
    )
