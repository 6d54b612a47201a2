"""Saved fold models of JOBS.json (in DIR; usage: python cvana.py JOBS.json DIR): on each fold's held-out problems, the handler's
keep (a) as before session 42 (every ATen kept when no Triton config is), (b) now, and (c) now at
other confidence thresholds / top-k. Pooled per GPU."""

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "session31"))
from _keep import Scored
from cv_jobs import job_data

from torch_diode.config import config
from torch_diode.model import load_model

jobs = json.load(open(sys.argv[1]))
out = Path(sys.argv[2])
base = config.options()
variants = {
    "before": (3, 0.8, True),
    "now": (3, 0.8, False),
    "now thr0.7": (3, 0.7, False),
    "now thr0": (3, 0.0, False),
    "now top4 thr0": (4, 0.0, False),
    "now top4 thr0.7": (4, 0.7, False),
}
pool = {}
for job in jobs:
    f = out / f"{job['id']}.safetensors"
    if not f.exists():
        continue
    model = load_model(f)
    _, held, _ = job_data(job)
    acc = pool.setdefault(job["hw"], {v: [] for v in variants})
    conf_rows = pool.setdefault(job["hw"] + "/conf", [])
    for pt in held.by_problem():
        sc = Scored(model, held, pt, base)
        b = int(np.argmin(sc.log))
        conf_rows.append((math.exp(-sc.std[b]), math.log(sc.measured[b] / sc.measured.min())))
        for name, (k, thr, old) in variants.items():
            opts = base.replace(top_k_configs=k, confidence_threshold=thr)
            _, kept, loss = sc.keep(opts, drop_slower_aten=False if old else None)
            acc[name].append((len(kept), loss))
    print("done", job["id"], flush=True)
for hw, acc in pool.items():
    if hw.endswith("/conf"):
        R = np.array(acc)
        low = R[:, 0] < 0.8

        def rk(x):
            return np.argsort(np.argsort(x))

        print(
            f"{hw}: {len(R)} problems, under 0.8: {int(low.sum())} top-1 {math.exp(R[low, 1].mean()):.4f}, others {math.exp(R[~low, 1].mean()):.4f}, spearman {np.corrcoef(rk(R[:, 0]), rk(R[:, 1]))[0, 1]:.3f}"
        )
        continue
    for name, r in acc.items():
        r = np.array(r)
        print(
            f"{hw} {name:16s} n {len(r)} kept {r[:, 0].mean():.2f} single {int((r[:, 0] == 1).sum())} best-kept {math.exp(r[:, 1].mean()):.4f} p95 {math.exp(np.percentile(r[:, 1], 95)):.3f}"
        )
