"""Where the top-1 pick trails stock's pick: per class, summed log(model/stock) and counterfactuals."""

import math
import sys
from collections import defaultdict

import numpy as np

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals, read_max_autotune_solution
from torch_diode.model import load_model
from torch_diode.ranking import aten_variant_call_trusted

val, stockf, m = sys.argv[1:4]
ds = read_dataset(val)
stock = read_max_autotune_solution(stockf)
ev = problem_evals(load_model(m), ds, stock=stock, max_compile_cost=config.options().max_compile_cost)
agg = defaultdict(lambda: np.zeros(6))
for e in ev:
    if e.stock_us is None:
        continue
    o = e.ranked()
    pick = e.measured_us[o[0]]
    aten = np.array([c.is_aten for c in e.choices])
    tri_order = [i for i in o if not aten[i]]
    mt = e.measured_us[tri_order[0]] if tri_order else math.inf
    ma = e.measured_us[aten].min() if aten.any() else math.inf
    best = min(e.measured_us.min(), e.oracle_us or math.inf)
    p = e.problem
    cls = (
        ("trusted" if aten_variant_call_trusted(p) else "other") + " " + str(p.dtype).replace("torch.", "") + " " + p.op
    )
    row = np.array(
        [
            1,
            math.log(pick / e.stock_us),
            math.log(min(mt, ma) / e.stock_us),
            math.log(e.stock_us / best),
            math.log(pick / best),
            float(e.choices[o[0]].is_aten),
        ]
    )
    for k in (cls, "ALL", cls.split()[0]):
        agg[k] += row
print(
    "class: n, sum log(pick/stock) pts, with perfect ATen/Triton call, stock regret (geo), pick regret (geo), ATen picked"
)
for k in sorted(agg):
    n, a, b, s, r, at = agg[k]
    print(f"{k:32s} {int(n):4d} {100 * a:7.1f} {100 * b:7.1f}  {math.exp(s / n):.4f} {math.exp(r / n):.4f} {int(at)}")
