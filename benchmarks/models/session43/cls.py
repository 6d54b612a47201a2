"""The cuBLAS features' change of regret@1 by class, paired per problem: the handler's trusted
class (aligned fp16/bf16) against the rest, the dtype, and the family of cuBLAS kernel the
problem's ATen choice runs (``bias_addmm``'s where an addmm has both).

    python benchmarks/models/session43/cls.py BASELINE_DIR VARIANT_DIR cv3|val
"""

import glob
import json
import math
import sys
from collections import defaultdict

from _heldout import kernel_families

from torch_diode.ranking import aten_variant_call_trusted
from torch_diode.records import Problem

A, B, part = sys.argv[1], sys.argv[2], sys.argv[3]
fam = {}
for g in ("H100", "H200"):
    for (pj, template), f in kernel_families(f"NVIDIA-{g}").items():
        key = (g.lower(), pj)
        if template != "aten::addmm" or key not in fam:  # bias_addmm's where an addmm has both
            fam[key] = f
agg = defaultdict(lambda: [0, 0.0, 0.0])
for f in sorted(glob.glob(f"{A}/*-{part}*.json")):
    ja = json.load(open(f))
    jb = json.load(open(f.replace(A, B).replace("-base", "-cub")))
    hw = ja["job"]["hw"].split("-")[1].lower()
    for ra, rb in zip(ja["rows"], jb["rows"]):
        pd = json.loads(ra["p"])
        pd2 = {k: (tuple(v) if isinstance(v, list) else v) for k, v in pd.items()}
        p = Problem(**pd2)
        c = "trusted" if aten_variant_call_trusted(p) else "other"
        pk = json.dumps({**pd, "stride_bias": pd.get("stride_bias")}, sort_keys=True)
        fm = fam.get((hw, pk), "?")
        for k in (f"{hw} {c}", f"{hw} fam {fm}", f"{hw} {p.dtype}"):
            agg[k][0] += 1
            agg[k][1] += math.log(ra["r1"])
            agg[k][2] += math.log(rb["r1"])
for k in sorted(agg):
    n, a, b = agg[k]
    print(f"{k:24s} n {n:4d} r1 {math.exp(a / n):.4f} -> {math.exp(b / n):.4f}  summed pts {100 * (b - a):+7.1f}")
