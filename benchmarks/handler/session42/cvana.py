"""Saved fold models of JOBS.json (in DIR; usage: python cvana.py JOBS.json DIR): on each fold's held-out problems, the handler's
keep (a) as before session 42 (every ATen kept when no Triton config is), (b) now, and (c) now at
other confidence thresholds / top-k. Pooled per GPU."""

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "session31"))
from cv_jobs import job_data

from torch_diode.config import config
from torch_diode.inductor.choices import select
from torch_diode.model import load_model
from torch_diode.ranking import aten_variant_call_trusted, order_of

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
        med = pt.median_by_choice()
        ids = list(med)
        ch = [held.choices[c] for c in ids]
        tm = np.array([med[c] for c in ids])
        pred = model.predict(pt.problem, ch)
        lt = np.asarray(pred.log_time_us, dtype=np.float64)
        sd = np.asarray(pred.std, dtype=np.float64)
        aten = np.array([c.is_aten for c in ch])
        t, a = np.flatnonzero(~aten), np.flatnonzero(aten)
        order = order_of(pt.problem, [ch[i] for i in t], lt[t], diversity=base.diversity, cliff_guard=base.cliff_guard)
        b = int(np.argmin(lt))
        conf_rows.append((math.exp(-sd[b]), math.log(tm[b] / tm.min())))
        for name, (k, thr, old) in variants.items():
            sel = select(
                lt[t],
                sd[t],
                lt[a],
                sd[a],
                base.replace(top_k_configs=k, confidence_threshold=thr),
                keep_one_triton=len(a) == 0,
                triton_order=order,
                drop_slower_aten=(not old) and aten_variant_call_trusted(pt.problem),
            )
            ak = sel.aten
            kept = [t[i] for i in sel.triton] + [a[i] for i in ak]
            acc[name].append((len(kept), math.log(tm[kept].min() / tm.min())))
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
