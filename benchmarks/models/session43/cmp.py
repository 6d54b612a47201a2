import glob
import json
import math
import sys
from collections import defaultdict

import numpy as np

A, B = sys.argv[1], sys.argv[2]  # folders: baseline, variant


def load(d, tag):
    out = {}
    for f in glob.glob(f"{d}/*.json"):
        j = json.load(open(f))
        k = j["job"]["id"].replace(tag, "")
        out[k] = j["rows"]
    return out


a, b = load(A, "-base"), load(B, "-cub")


def g(v):
    return math.exp(np.mean(np.log(v)))


pool = defaultdict(lambda: [[], []])
for k in sorted(a):
    ra, rb = a[k], b[k]
    assert [r["p"] for r in ra] == [r["p"] for r in rb]
    part = "val" if "-val-" in k else "cv"
    hw = k.split("-")[1]
    pool[(hw, part)][0] += ra
    pool[(hw, part)][1] += rb
    print(
        f"{k:22s} r1 {g([r['r1'] for r in ra]):.4f} -> {g([r['r1'] for r in rb]):.4f}  r5 {g([r['r5'] for r in ra]):.4f} -> {g([r['r5'] for r in rb]):.4f}  k3 {g([r['k3'] for r in ra]):.4f} -> {g([r['k3'] for r in rb]):.4f}  aten picks {sum(r['aten_pick'] for r in ra)} -> {sum(r['aten_pick'] for r in rb)}"
    )
for (hw, part), (ra, rb) in sorted(pool.items()):
    s = [r["stock"] for r in ra if r.get("stock")]
    line = f"POOL {hw} {part} n {len(ra)} r1 {g([r['r1'] for r in ra]):.4f} -> {g([r['r1'] for r in rb]):.4f} r5 {g([r['r5'] for r in ra]):.4f} -> {g([r['r5'] for r in rb]):.4f} p95r5 {np.percentile([r['r5'] for r in ra], 95):.3f} -> {np.percentile([r['r5'] for r in rb], 95):.3f} k3 {g([r['k3'] for r in ra]):.4f} -> {g([r['k3'] for r in rb]):.4f}"
    if s:
        sa = [r["r1"] / r["stock"] for r in ra if r.get("stock")]
        sb = [r["r1"] / r["stock"] for r in rb if r.get("stock")]
        line += f" vs stock {g(sa):.4f} -> {g(sb):.4f} (stock regret {g(s):.4f})"
    d = np.log([r["r1"] for r in rb]) - np.log([r["r1"] for r in ra])
    line += f" | better {int((d < -1e-9).sum())} worse {int((d > 1e-9).sum())}"
    print(line)
