"""Winner's curse of the derived stock pick: on problems measured twice (train.msgpack and
train-repeat.msgpack), stock's DEFAULT pick chosen by the same run's times vs by the other run's."""

import math
import sys

import numpy as np

from torch_diode.collect.sweep import inductor_choices
from torch_diode.dataset import read_dataset

key = sys.argv[1]
A = read_dataset(f"data/{key}/train.msgpack")
B = read_dataset(f"data/{key}/train-repeat.msgpack")
medA = {pt.problem: {A.choices[c]: t for c, t in pt.median_by_choice().items()} for pt in A.by_problem()}
rows = []
for pt in B.by_problem():
    p = pt.problem
    if p not in medA:
        continue
    mb = {B.choices[c]: t for c, t in pt.median_by_choice().items()}
    ma = medA[p]
    both = set(ma) & set(mb)
    cands = {it.choice for it in inductor_choices(p, "DEFAULT")}
    cs = [c for c in cands if c in both]
    if len(cs) < 2:
        continue
    for X, Y in ((ma, mb), (mb, ma)):  # X: the evaluation run, Y: the other
        oX = min(X[c] for c in both)
        same = min(X[c] for c in cs) / oX
        other = X[min(cs, key=lambda c: Y[c])] / oX
        rows.append((p.key(), len(cs), len(both), same, other))


def g(v):
    return math.exp(np.mean(np.log(v)))


R = np.array([(r[3], r[4]) for r in rows])
for r in rows:
    print(r[0][:60], r[1], r[2], round(r[3], 4), round(r[4], 4))
print(
    key,
    "evaluations",
    len(rows),
    f"stock pick by same run {g(R[:, 0]):.4f}, by the other run {g(R[:, 1]):.4f}, ratio {g(R[:, 1] / R[:, 0]):.4f}",
)
