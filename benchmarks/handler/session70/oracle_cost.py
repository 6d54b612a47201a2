#!/usr/bin/env python
"""Session 70, rule 1 (PLAN.md): what dropping one- and two-warp Triton configs costs the best kernel.

For each problem of a GPU's committed validation set, the fastest measured choice with every
config against the fastest with Triton configs of four or more warps (ATen included in both):
per op, the geometric mean of the ratio, its maximum, and how often the fastest has fewer warps.

    python benchmarks/handler/session70/oracle_cost.py     # both GPUs
"""

from __future__ import annotations

import collections

import numpy as np

from torch_diode.dataset import read_dataset

for hw in ("NVIDIA-H200", "NVIDIA-H100"):
    ds = read_dataset(f"data/{hw}/val.msgpack")
    warps = np.array([c.num_warps if not c.is_aten else 99 for c in ds.choices])
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    few_best: collections.Counter[str] = collections.Counter()
    for i, p in enumerate(ds.problems):
        sel = ds.problem_idx == i
        t, w = ds.time_us[sel], warps[ds.choice_idx[sel]]
        for key in (p.op, "all"):
            ratios[key].append(float(t[w >= 4].min() / t.min()))
            few_best[key] += int(w[t.argmin()] < 4)
    for op, v in ratios.items():
        r = np.array(v)
        print(f"{hw} {op}: n {len(r)}, best has < 4 warps: {few_best[op]}, geomean {np.exp(np.log(r).mean()):.4f}, "
              f"max {r.max():.3f}, > 1.02: {int((r > 1.02).sum())}")  # fmt: skip
