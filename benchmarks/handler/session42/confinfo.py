import math
import sys

import numpy as np

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.inductor.choices import select
from torch_diode.model import load_model
from torch_diode.ranking import aten_variant_call_trusted, order_of

ds = read_dataset(sys.argv[2])
opts = config.options()
for mp in sys.argv[3:] or [sys.argv[1]]:
    model = load_model(mp)
    rows = []
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
        b = int(np.argmin(lt))
        conf = math.exp(-sd[b])
        r = {}
        for name, thr in (("nowiden", 0.0), ("default", opts.confidence_threshold)):
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
            r[name] = (len(kept), math.log(tm[kept].min() / tm.min()))
        rows.append((conf, math.log(tm[b] / tm.min()), *r["nowiden"], *r["default"]))
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
