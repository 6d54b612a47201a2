"""Session 42: on each fold model's held-out addmm problems (the jobs of jobs-cv-save.json, saved
in DIR), where select(drop_slower_aten=True) on every problem changes what the handler keeps:
its loss against keeping both ATen variants, and against addmm alone, per GPU, class and dtype.
usage: python cvdiff.py JOBS.json DIR"""

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "session31"))
from _keep import Scored
from cv_jobs import job_data

from torch_diode.config import config
from torch_diode.features import operands_aligned16, output_aligned16
from torch_diode.model import load_model

jobs = json.load(open(sys.argv[1]))
out = Path(sys.argv[2])
base = config.options()
rows = []
for job in jobs:
    model = load_model(out / f"{job['id']}.safetensors")
    _, held, _ = job_data(job)
    for pt in held.by_problem():
        p = pt.problem
        if p.op not in ("addmm", "baddbmm"):
            continue
        sc = Scored(model, held, pt, base)
        ch, tm, lt, a = sc.choices, sc.measured, sc.log, sc.a
        if len(a) < 2:
            continue
        sel, _, _ = sc.keep(base, drop_slower_aten=True)
        if sel.triton or len(sel.aten) == len(a):
            continue
        before = math.log(tm[list(a)].min() / tm.min())
        now = math.log(tm[[a[i] for i in sel.aten]].min() / tm.min())
        cls = "aligned" if all(operands_aligned16(p)) and output_aligned16(p) else "misaligned"
        kept_t = float(tm[[a[i] for i in sel.aten]].min())
        addmm_t = float(min(tm[i] for i in a if ch[i].template == "aten::addmm"))
        rows.append(
            (
                job["hw"],
                cls,
                p.dtype,
                now - before,
                math.log(kept_t / addmm_t),
                {ch[i].template: (round(float(tm[i]), 1), round(float(np.exp(lt[i])), 1)) for i in a},
                f"{p.m}x{p.n}x{p.k}",
            )
        )
for hw in ("NVIDIA-H100", "NVIDIA-H200"):
    for cls in ("aligned", "misaligned"):
        for dt in ("float16", "bfloat16", "float32"):
            r = [x for x in rows if x[0] == hw and x[1] == cls and x[2] == dt]
            if not r:
                continue
            d = np.array([x[3] for x in r])
            q = np.array([x[4] for x in r])
            print(
                hw,
                cls,
                dt,
                "changed",
                len(r),
                "worse than best-of-pair",
                int((d > 1e-9).sum()),
                f"sum {d.sum():.3f}",
                f"| vs addmm: sum {q.sum():.3f}, worse {int((q > 1e-9).sum())}",
            )
for hw in ("NVIDIA-H100", "NVIDIA-H200"):
    for cls in ("aligned", "misaligned"):
        r = [x for x in rows if x[0] == hw and x[1] == cls]
        if not r:
            continue
        d = np.array([x[3] for x in r])
        print(
            hw,
            cls,
            "changed",
            len(r),
            "worse",
            int((d > 1e-9).sum()),
            f"sum log loss {d.sum():.3f}",
            f"max {d.max():.3f}",
        )
for x in sorted(rows, key=lambda x: -x[3])[:12]:
    print(x)
