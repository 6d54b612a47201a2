"""OOF: error of ATen's predicted log time vs of the model's top Triton pick, on the CV folds."""

import json
import math
import sys

import numpy as np

sys.path.insert(0, "benchmarks/models/session31")
from cv_jobs import job_data

from torch_diode.config import config
from torch_diode.evaluate import problem_evals
from torch_diode.model import load_model
from torch_diode.ranking import aten_variant_call_trusted

jobs = json.load(open(sys.argv[1]))
d = sys.argv[2]
hw = sys.argv[3]
R = []
RT = []
RB = []
for j in jobs:
    if j["hw"] != hw:
        continue
    _, held, _ = job_data(j)
    ev = problem_evals(
        load_model(f"{d}/{j['id']}.safetensors"), held, max_compile_cost=config.options().max_compile_cost
    )
    for e in ev:
        aten = np.array([c.is_aten for c in e.choices])
        if not aten.any():
            continue
        o = e.ranked()
        t = next(i for i in o if not aten[i])
        ai = np.flatnonzero(aten)
        a = ai[np.argmin(e.predicted_log_us[ai])]
        ma = e.measured_us[aten].min()
        t2 = [i for i in o if not aten[i]][1] if (~aten).sum() > 1 else t
        tb = np.flatnonzero(~aten)[np.argmin(e.measured_us[~aten])]
        RT.append(
            (e.predicted_log_us[t] - math.log(e.measured_us[t]))
            - (e.predicted_log_us[t2] - math.log(e.measured_us[t2]))
        )
        RB.append(
            (e.predicted_log_us[t] - math.log(e.measured_us[t]))
            - (e.predicted_log_us[tb] - math.log(e.measured_us[tb]))
        )
        R.append(
            (
                aten_variant_call_trusted(e.problem),
                e.predicted_log_us[a] - math.log(e.measured_us[a]),
                e.predicted_log_us[t] - math.log(e.measured_us[t]),
                e.predicted_log_us[a] - e.predicted_log_us[t],
                math.log(e.measured_us[a] / e.measured_us[t]),
                e.problem.dtype,
            )
        )
R = np.array([r[:5] for r in R], dtype=float)
RT = np.array(RT)
RB = np.array(RB)
for nm, m in (("all", np.ones(len(R), bool)), ("trusted", R[:, 0] == 1), ("other", R[:, 0] == 0)):
    X = R[m]
    eA, eT = X[:, 1], X[:, 2]
    wrong = np.sign(X[:, 3]) != np.sign(X[:, 4])
    cost = np.abs(X[:, 4]) * wrong
    print(f"   sd(eT1-eT2) {RT[m].std():.3f} sd(eT-eTbest) {RB[m].std():.3f}")
    print(
        f"{hw} {nm:8s} n {m.sum():4d} sd(eA) {eA.std():.3f} sd(eT) {eT.std():.3f} corr {np.corrcoef(eA, eT)[0, 1]:.2f} sd(eA-eT) {(eA - eT).std():.3f} wrong calls {wrong.mean():.2f} cost pts/problem {100 * cost.mean():.2f}"
    )
