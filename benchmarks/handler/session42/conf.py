"""Offline: what the handler keeps (default options) on the 15 speed problems (candidates: the
val set's choices of the same op and dtype) and on the val set, for a model file.
usage: python conf.py MODEL VAL.msgpack"""

import math
import sys

import numpy as np

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "scripts"))
from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.inductor.choices import select
from torch_diode.model import load_model
from torch_diode.ranking import aten_variant_call_trusted, order_of
from torch_diode.records import Problem

model = load_model(sys.argv[1])
ds = read_dataset(sys.argv[2])
opts = config.options()


def keep(problem, choices):
    pred = model.predict(problem, choices)
    lt = np.asarray(pred.log_time_us, dtype=np.float64)
    sd = np.asarray(pred.std, dtype=np.float64)
    aten = np.array([c.is_aten for c in choices])
    t, a = np.flatnonzero(~aten), np.flatnonzero(aten)
    tri = [choices[i] for i in t]
    order = order_of(problem, tri, lt[t], diversity=opts.diversity, cliff_guard=opts.cliff_guard)
    sel = select(
        lt[t],
        sd[t],
        lt[a],
        sd[a],
        opts,
        keep_one_triton=len(a) == 0,
        triton_order=order,
        drop_slower_aten=aten_variant_call_trusted(problem),
    )
    b = int(np.argmin(lt))
    return sel, len(sel.triton) + len(sel.aten), float(sd[b]), choices[b]


# candidate lists per (op, dtype): the union of choices of the val set's problems
cands = {}
for pt in ds.by_problem():
    key = (pt.problem.op, pt.problem.dtype)
    s = cands.setdefault(key, {})
    for c in pt.median_by_choice():
        s[ds.choices[c]] = None
from check_handler_gpu import SPEED_PROBLEMS  # noqa: E402 (scripts/ on sys.path above)

for g in SPEED_PROBLEMS:
    batched = g.op in ("bmm", "baddbmm")
    sb = ((g.k * g.n,) if batched else ()) + ((1, g.k) if g.transpose_b else (g.n, 1))
    p = Problem(op=g.op, m=g.m, n=g.n, k=g.k, batch=g.batch, dtype=g.dtype, stride_b=sb)
    ch = list(cands[(g.op, p.dtype)])
    sel, n, sd, best = keep(p, ch)
    print(
        f"{g.name:18s} cands {len(ch):5d} kept {n} conf {math.exp(-sd):.3f} best {best.template if best.is_aten else 'triton'}"
    )
ns, lows = [], 0
for pt in ds.by_problem():
    ch = [ds.choices[c] for c in pt.median_by_choice()]
    sel, n, sd, best = keep(pt.problem, ch)
    ns.append(n)
    lows += not sel.confident
print(f"val: {len(ns)} problems, kept mean {np.mean(ns):.2f}, single {sum(x == 1 for x in ns)}, low confidence {lows}")
